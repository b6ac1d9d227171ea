"""The value a script's condition had under one launch, worked out statically: `if args.distributed:`,
`if args.local_rank != -1:`, `if 'WORLD_SIZE' in os.environ and int(os.environ['WORLD_SIZE']) > 1:`.

A diagnosis that knows how the run was started (the script's arguments, the variables torchrun set in
every rank, whether there were GPUs) asks why a branch was not taken. Only what the launch fixes is
evaluated: a command-line option (its default unless the arguments pass it, or the value the script
assigns it), an environment variable the launch set, a module-level name assigned once, comparisons,
`and`/`or`/`not`, int()/float()/str(). Anything else is UNKNOWN, and the answer says so rather than guess.

    value, leaves = evaluate(model, if_node.test, Launch(argv, env, gpus), path)
"""
from __future__ import annotations

import ast
import operator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from mgtutor.diagnostics.check.run_facts import code_at
from mgtutor.diagnostics.check.script_model import ScriptModel, constant, keyword, last_name
from mgtutor.training.foundation.i18n import _

if TYPE_CHECKING:
    from mgtutor.diagnostics.check.script_options import ScriptOption

UNKNOWN: Any = object()
MAX_DEPTH = 6
COMPARE: dict[type, Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt,
    ast.GtE: operator.ge, ast.Is: operator.is_, ast.IsNot: operator.is_not,
    ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b}
CASTS: dict[str, Callable[[Any], Any]] = {"int": int, "float": float, "str": str, "bool": bool}


@dataclass(frozen=True)
class Launch:
    """How a run started its script: the script's own arguments, the environment every rank had for sure
    (torchrun's variables and the run's own), and the GPUs it saw."""
    argv: list[str]
    env: dict[str, str]
    gpus: int = 0


@dataclass(frozen=True)
class Leaf:
    """One piece of a condition whose value the launch fixed, and why it had that value."""
    code: str
    value: Any
    why: str
    option: ScriptOption | None = None
    action: str | None = None  # the option's argparse action: store_true, store_false, …


@dataclass
class _Evaluation:
    model: ScriptModel
    launch: Launch
    path: Path
    leaves: list[Leaf] = field(default_factory=list)
    depth: int = 0


def evaluate(model: ScriptModel, expr: ast.expr, launch: Launch, path: Path | None = None) -> tuple[Any, list[Leaf]]:
    """(the value of `expr` under `launch` or UNKNOWN, the leaves that fixed it)."""
    state = _Evaluation(model, launch, path or Path(model.filename))
    try:
        value = _value(state, expr)
    except (TypeError, ValueError, ArithmeticError, RecursionError):
        value = UNKNOWN
    return value, state.leaves


def _value(state: _Evaluation, node: ast.expr) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.BoolOp):
        return _bool_op(state, node)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        inner = _value(state, node.operand)
        return UNKNOWN if inner is UNKNOWN else not inner
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _value(state, node.operand)
        return UNKNOWN if inner is UNKNOWN else -inner
    if isinstance(node, ast.Compare):
        return _compare(state, node)
    if isinstance(node, ast.IfExp):
        test = _value(state, node.test)
        return UNKNOWN if test is UNKNOWN else _value(state, node.body if test else node.orelse)
    if isinstance(node, ast.Call):
        return _call(state, node)
    if isinstance(node, ast.Subscript) and _is_environ(node.value):
        return _env(state, node, constant(node.slice))
    if isinstance(node, ast.Attribute):
        return _attribute(state, node)
    if isinstance(node, ast.Name):
        return _name(state, node)
    return UNKNOWN


def _bool_op(state: _Evaluation, node: ast.BoolOp) -> Any:
    values = [_value(state, v) for v in node.values]
    decisive = (lambda v: v is not UNKNOWN and not v) if isinstance(node.op, ast.And) else \
        (lambda v: v is not UNKNOWN and bool(v))
    if any(decisive(v) for v in values):
        return next(v for v in values if decisive(v))
    return UNKNOWN if any(v is UNKNOWN for v in values) else values[-1]


def _compare(state: _Evaluation, node: ast.Compare) -> Any:
    if len(node.ops) == 1 and isinstance(node.ops[0], (ast.In, ast.NotIn)) and _is_environ(node.comparators[0]):
        if _env(state, node, constant(node.left)) is UNKNOWN:
            return UNKNOWN
        return isinstance(node.ops[0], ast.In)
    left = _value(state, node.left)
    for op, right_node in zip(node.ops, node.comparators):
        right = _value(state, right_node)
        if left is UNKNOWN or right is UNKNOWN or type(op) not in COMPARE:
            return UNKNOWN
        if not COMPARE[type(op)](left, right):
            return False
        left = right
    return True


def _call(state: _Evaluation, node: ast.Call) -> Any:
    name = state.model.resolve(node.func) or ""
    if name in CASTS and len(node.args) == 1:
        inner = _value(state, node.args[0])
        return UNKNOWN if inner is UNKNOWN else CASTS[name](inner)
    if name in ("os.environ.get", "os.getenv") or (isinstance(node.func, ast.Attribute) and node.func.attr == "get"
                                                  and _is_environ(node.func.value)):
        return _env(state, node, constant(node.args[0]) if node.args else None)
    if name == "torch.cuda.is_available":
        return _fixed(state, node, state.launch.gpus > 0, _("this run saw {count} GPU(s)").format(count=state.launch.gpus))
    if name == "torch.cuda.device_count":
        return _fixed(state, node, state.launch.gpus, _("this run saw {count} GPU(s)").format(count=state.launch.gpus))
    if name == "torch.distributed.is_available":
        return True
    return UNKNOWN


def _env(state: _Evaluation, node: ast.AST, name: Any) -> Any:
    if not isinstance(name, str) or name not in state.launch.env:
        return UNKNOWN  # the user's own shell may have set it: nobody recorded it
    value = state.launch.env[name]
    return _fixed(state, node, value, _("{name} is {value!r} in every rank's environment").format(name=name, value=value))


def _fixed(state: _Evaluation, node: ast.AST, value: Any, why: str, option: ScriptOption | None = None,
           action: str | None = None) -> Any:
    state.leaves.append(Leaf(code_of(state.model, node), value, why, option, action))
    return value


def code_of(model: ScriptModel, node: ast.AST) -> str:
    return ast.get_source_segment(model.source, node) or ast.unparse(node)


def _is_environ(node: ast.AST) -> bool:
    return isinstance(node, (ast.Attribute, ast.Name)) and last_name(node) == "environ"


def _attribute(state: _Evaluation, node: ast.Attribute) -> Any:
    """`args.distributed`: what the script assigns it last, else the option's value under the launch."""
    assigned = _last_store(state, node.attr, attribute=True, before=node.lineno)
    if assigned is not None:
        return _nested(state, assigned)
    option = _option(state, node.attr)
    if option is None:
        return UNKNOWN
    action = _action(state.model, option)
    passed = _passed(state.launch.argv, option, action)
    if passed is not None:
        return _fixed(state, node, passed, _("{flag} was passed").format(flag=option.flag), option, action)
    default = {"store_true": False, "store_false": True}.get(action or "", _default(state, option))
    if isinstance(default, str) and option.type_name in ("int", "float"):
        default = CASTS[option.type_name](default)
    return _fixed(state, node, default, _("{flag} was not passed (its default is {default!r})").format(
        flag=option.flag, default=default), option, action)


def _name(state: _Evaluation, node: ast.Name) -> Any:
    assigned = _last_store(state, node.id, attribute=False, before=node.lineno)
    return _nested(state, assigned) if assigned is not None else UNKNOWN


def _nested(state: _Evaluation, value: ast.expr) -> Any:
    if state.depth >= MAX_DEPTH:
        return UNKNOWN
    state.depth += 1
    try:
        return _value(state, value)
    finally:
        state.depth -= 1


def _last_store(state: _Evaluation, name: str, attribute: bool, before: int) -> ast.expr | None:
    """The value of the last `name = …` (or `x.name = …`) above line `before`, when the script assigns it
    in one place only (more than one: which one ran depends on the path, so it is not guessed)."""
    stores = [n for n in state.model.nodes if isinstance(n, ast.Assign) and len(n.targets) == 1 and (
        isinstance(n.targets[0], ast.Attribute) and n.targets[0].attr == name if attribute
        else isinstance(n.targets[0], ast.Name) and n.targets[0].id == name)]
    earlier = [n for n in stores if n.lineno < before]
    return earlier[-1].value if len(stores) == 1 and earlier else None


def _option(state: _Evaluation, dest: str) -> ScriptOption | None:
    from mgtutor.diagnostics.check.script import CheckError  # check's rules load only when a script is read
    from mgtutor.diagnostics.check.script_options import script_options

    try:
        options = script_options(state.path)
    except CheckError:
        return None
    return next((o for o in options if o.dest == dest), None)


def _add_argument(model: ScriptModel, option: ScriptOption) -> ast.Call | None:
    return next((c for c in model.method_calls("add_argument") if c.lineno == option.line), None)


def _action(model: ScriptModel, option: ScriptOption) -> str | None:
    call = _add_argument(model, option)
    action = constant(keyword(call, "action")) if call is not None else None
    return action if isinstance(action, str) else None


def _default(state: _Evaluation, option: ScriptOption) -> Any:
    """The option's default as written (`default=-1` too, which is no ast.Constant); None when it has none."""
    call = _add_argument(state.model, option)
    written = keyword(call, "default") if call is not None else None
    if written is None:
        return option.default
    value = _nested(state, written)
    return None if value is UNKNOWN else value


def _passed(argv: list[str], option: ScriptOption, action: str | None) -> Any:
    from mgtutor.diagnostics.check.script_options import option_value

    if action in ("store_true", "store_false"):
        return (action == "store_true") if any(arg in option.flags for arg in argv) else None
    text = option_value(argv, option)
    if text is None:
        return None
    return CASTS[option.type_name](text) if option.type_name in ("int", "float") else text
