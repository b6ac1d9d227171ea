"""The model side of `mgtutor convert`: which objects are models, where each is wrapped in DDP, what
happens to DataParallel, and which uses of a wrapped model must go through `.module`.

A model is what the script moves to its device (`x = Net().to(device)`, `net.cuda()`) outside a loop
and either hands to an optimizer (`x.parameters()`) or calls a model by name. It is wrapped after the
statements that still set it up (`.apply(init)`, loading weights, `print(net)`): DDP copies rank 0's
weights to every rank when it is built, so whatever changes the weights must come first.
DataParallel goes: with one process per GPU, DDP does its work (`nn.DataParallel(m)` becomes the DDP
wrap, `nn.parallel.data_parallel(mod, x, ids)` becomes `mod(x)`).
"""
from __future__ import annotations

import ast
from dataclasses import dataclass

from mgtutor.diagnostics.check.fix.edit_model import Edit, where
from mgtutor.diagnostics.check.fix.rewrites import text
from mgtutor.diagnostics.check.match.core import DATAPARALLEL, DDP
from mgtutor.diagnostics.check.script_model import DEF_NODES, LOOP_NODES, ScriptModel, last_name

# what a DDP wrapper answers itself (nn.Module's own API); any other attribute is the user's model's
MODULE_API = frozenset({
    "add_module", "apply", "bfloat16", "buffers", "children", "compile", "cpu", "cuda", "double", "eval",
    "extra_repr", "float", "forward", "get_buffer", "get_extra_state", "get_parameter", "get_submodule", "half",
    "ipu", "modules", "mtia", "named_buffers", "named_children", "named_modules", "named_parameters",
    "parameters", "register_backward_hook", "register_buffer", "register_forward_hook",
    "register_forward_pre_hook", "register_full_backward_hook", "register_full_backward_pre_hook",
    "register_module", "register_parameter", "requires_grad_", "share_memory", "to", "to_empty", "train",
    "training", "type", "xpu", "zero_grad", "module", "no_sync", "join", "register_comm_hook", "device_ids",
    "__class__", "__dict__",
})
FUNCTIONAL_DP = ("torch.nn.parallel.data_parallel", "torch.nn.parallel.data_parallel.data_parallel")


@dataclass
class Wrap:
    target: str          # how the script spells the model: `model`, `self.model`, `netG`
    anchor: ast.stmt     # the wrap goes right after this statement
    scope: ast.AST | None
    move_to: str = ""    # a model this file never moves: the device it is moved to as it is wrapped


def _moved(m: ScriptModel, node: ast.AST) -> str | None:
    """The target of `x = ….to(d)` / `x = ….cuda()` / `x.to(d)` (a statement), else None."""
    if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.value, ast.Call) \
            and last_name(node.value.func) in ("to", "cuda") and isinstance(node.targets[0], (ast.Name, ast.Attribute)):
        return text(m, node.targets[0])
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and last_name(node.value.func) in ("to", "cuda") \
            and isinstance(node.value.func, ast.Attribute) and isinstance(node.value.func.value, (ast.Name, ast.Attribute)):
        return text(m, node.value.func.value)
    return None


def _in_loop(m: ScriptModel, node: ast.AST) -> bool:
    current = m.parent.get(node)
    while current is not None and not isinstance(current, DEF_NODES):
        if isinstance(current, LOOP_NODES):
            return True
        current = m.parent.get(current)
    return False


def _uses(m: ScriptModel, stmt: ast.stmt, target: str) -> bool:
    """Whether the statement trains or hands out the model (`target(x)`, `target.parameters()`)."""
    for n in ast.walk(stmt):
        if isinstance(n, ast.Call) and (text(m, n.func) == target or isinstance(n.func, ast.Attribute)
                                        and text(m, n.func.value) == target
                                        and n.func.attr in ("parameters", "named_parameters")):
            return True
    return False


def _mentions(m: ScriptModel, stmt: ast.AST, target: str) -> list[ast.AST]:
    return [n for n in ast.walk(stmt) if isinstance(n, (ast.Name, ast.Attribute)) and text(m, n) == target]


def _sets_up(m: ScriptModel, stmt: ast.stmt, target: str) -> bool:
    """`net.apply(init)`, `net.load_state_dict(…)` (under an `if` too), `print(net)`, `net = net.half()`:
    the model is still being made. Saving it, training it or handing it on is not."""
    if isinstance(stmt, ast.If):
        return all(_sets_up(m, s, target) or not _mentions(m, s, target) for s in [*stmt.body, *stmt.orelse]) \
            and not _mentions(m, stmt.test, target)
    if isinstance(stmt, DEF_NODES) or not isinstance(stmt, (ast.Expr, ast.Assign)) or _uses(m, stmt, target):
        return False
    for mention in _mentions(m, stmt, target):
        parent = m.parent.get(mention)
        call = m.parent.get(parent) if isinstance(parent, ast.Attribute) else None
        method = isinstance(call, ast.Call) and isinstance(parent, ast.Attribute) and call.func is parent \
            and parent.attr not in ("state_dict", "forward")
        printed = isinstance(parent, ast.Call) and last_name(parent.func) == "print"
        stored = isinstance(parent, ast.Assign) and mention in parent.targets
        if not (method or printed or stored):
            return False
    return True


def _set_up_until(m: ScriptModel, stmt: ast.stmt, target: str) -> ast.stmt:
    """The last statement after `stmt`, in its block, that still sets the model up."""
    parent = m.parent.get(stmt)
    block = next((getattr(parent, f) for f in ("body", "orelse", "finalbody")
                  if isinstance(getattr(parent, f, None), list) and stmt in getattr(parent, f)), [stmt])
    last = stmt
    for following in block[block.index(stmt) + 1:]:
        if not _mentions(m, following, target) or not _sets_up(m, following, target) \
                or _data_parallel_of(m, following, target):
            break
        last = following
    return last


def models(m: ScriptModel, device: tuple[str, ast.AST, int] | None = None) -> list[Wrap]:
    """The models and where each is wrapped. `device` (its spelling, scope and line): a model handed to
    an optimizer that this file never moves is wrapped as `DDP(model.to(device))` when it is built in
    the scope of the device, after it is set."""
    optimized = {text(m, c.func.value) for c in m.method_calls("parameters") if isinstance(c.func, ast.Attribute)}
    found: dict[str, Wrap] = {}
    for node in m.nodes:
        target = _moved(m, node) if isinstance(node, ast.stmt) else None
        if target is None or target in found or _in_loop(m, node):
            continue
        if target in optimized or "model" in target.lower():
            built = _every_branch(m, node, target)  # type: ignore[arg-type]
            found[target] = Wrap(target, _set_up_until(m, built, target), m.enclosing(node, DEF_NODES))
            continue
    for target in sorted(optimized - set(found)) if device is not None else []:
        unmoved = _built_unmoved(m, target, device)  # type: ignore[arg-type]
        if unmoved is not None:
            found[target] = Wrap(target, _set_up_until(m, unmoved, target), device[1], move_to=device[0])  # type: ignore[index]
    return sorted(found.values(), key=lambda w: w.anchor.lineno)


def _every_branch(m: ScriptModel, stmt: ast.stmt, target: str) -> ast.stmt:
    """`if transformer: model = A().to(d) else: model = B().to(d)`: the `if`, so the wrap after it covers
    whichever model was built."""
    parent = m.parent.get(stmt)
    while isinstance(parent, ast.If) and parent.orelse:
        other = parent.orelse if _under_block(m, stmt, parent.body) else parent.body
        if not any(isinstance(n, ast.Assign) and any(text(m, t) == target for t in n.targets)
                   for s in other for n in ast.walk(s)):
            break
        stmt, parent = parent, m.parent.get(parent)
    return stmt


def _under_block(m: ScriptModel, node: ast.AST, block: list[ast.stmt]) -> bool:
    current: ast.AST | None = node
    while current is not None and current not in block:
        current = m.parent.get(current)
    return current is not None


def _built_unmoved(m: ScriptModel, target: str, device: tuple[str, ast.AST, int]) -> ast.stmt | None:
    """`model = ResNet(...)` in the device's scope, after the device is set, never moved in this file."""
    name, scope, line = device
    builds = [n for n in m.nodes if isinstance(n, ast.Assign) and len(n.targets) == 1
              and text(m, n.targets[0]) == target and isinstance(n.value, ast.Call)]
    moves = [c for c in m.calls if last_name(c.func) in ("to", "cuda") and isinstance(c.func, ast.Attribute)
             and text(m, c.func.value) == target]
    if len(builds) != 1 or moves or not name:
        return None
    build = builds[0]
    function = scope if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)) else None
    if m.enclosing(build, DEF_NODES) is not function or build.lineno <= line or _in_loop(m, build):
        return None
    return build


def _data_parallel_of(m: ScriptModel, stmt: ast.stmt, target: str) -> bool:
    return isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call) and \
        m.resolve(stmt.value.func) in DATAPARALLEL and any(text(m, t) == target for t in stmt.targets)


def data_parallel_edits(m: ScriptModel, wraps: list[Wrap]) -> tuple[list[Edit], set[str], list[int]]:
    """DataParallel out: `x = DataParallel(y)` becomes `x = DDP(y)` (that model is then wrapped), a
    DataParallel inside a longer expression becomes its module, `data_parallel(mod, x, …)` becomes
    `mod(x)`. Returns the edits, the models wrapped here and the lines changed."""
    edits, wrapped, lines = [], set(), []
    for call in m.calls_to(*DATAPARALLEL):
        if not call.args:
            continue
        stmt = m.parent.get(call)
        inner = text(m, call.args[0])
        branch = m.parent.get(stmt) if stmt is not None else None
        if isinstance(stmt, ast.Assign) and stmt.value is call and isinstance(branch, ast.If) \
                and branch.body == [stmt] and not branch.orelse and _removable(m, branch):
            edits.append(Edit("remove", where(branch, m.lines)))  # `if gpus > 1: m = DataParallel(m)`: DDP wraps it
        elif isinstance(stmt, ast.Assign) and stmt.value is call and len(stmt.targets) == 1 \
                and not isinstance(branch, ast.If):
            edits.append(Edit("replace", where(call, m.lines), f"DDP({inner})"))
            wrapped.add(text(m, stmt.targets[0]))
        else:
            edits.append(Edit("replace", where(call, m.lines), inner))
        lines.append(call.lineno)
    for call in m.calls:
        if m.resolve(call.func) in FUNCTIONAL_DP and len(call.args) >= 2:
            edits.append(Edit("replace", where(call, m.lines), f"{text(m, call.args[0])}({text(m, call.args[1])})"))
            lines.append(call.lineno)
    return edits, wrapped, lines


def _removable(m: ScriptModel, stmt: ast.stmt) -> bool:
    holder = m.parent.get(stmt)
    block: list[ast.stmt] = next((getattr(holder, f) for f in ("body", "orelse", "finalbody")
                                  if isinstance(getattr(holder, f, None), list) and stmt in getattr(holder, f)), [])
    return len(block) > 1


def module_edits(m: ScriptModel, wrap: Wrap, wrap_line: int) -> list[Edit]:
    """Attributes of the user's model read through the wrapper go through `.module` (`model.decode(z)`,
    `model.init_hidden(n)`), and so do state_dict()/load_state_dict(): the checkpoint keeps the one-GPU
    keys (no `module.` prefix), so either script can load it."""
    edits = []
    for node in m.nodes:
        if not (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load) and text(m, node.value) == wrap.target):
            continue
        if node.attr in MODULE_API:
            continue
        if _before_wrap(m, wrap, node, wrap_line):
            continue
        edits.append(Edit("replace", where(node, m.lines), f"{wrap.target}.module.{node.attr}"))
    for call in m.calls_to("torch.save", bare=False):  # `torch.save(model, f)`: the user's model, not the wrapper
        saved = call.args[0] if call.args else None
        if saved is not None and text(m, saved) == wrap.target and not _before_wrap(m, wrap, saved, wrap_line):
            edits.append(Edit("replace", where(saved, m.lines), f"{wrap.target}.module"))
    return edits


def _before_wrap(m: ScriptModel, wrap: Wrap, node: ast.AST, wrap_line: int) -> bool:
    return m.enclosing(node, DEF_NODES) is wrap.scope and getattr(node, "lineno", 0) <= wrap_line


def rewrap_edits(m: ScriptModel, wrap: Wrap) -> list[Edit]:
    """`model = torch.load(f)` after the wrap (word_language_model reloads its best model): wrapped again
    right there, so the name is a DDP model wherever the code reads it and `.module` stays right."""
    end = wrap.anchor.end_lineno or wrap.anchor.lineno
    again = [n for n in m.nodes if isinstance(n, ast.Assign) and m.enclosing(n, DEF_NODES) is wrap.scope
             and n.lineno > end and any(text(m, t) == wrap.target for t in n.targets)
             and not (isinstance(n.value, ast.Call) and m.resolve(n.value.func) in (*DATAPARALLEL, *DDP))]
    return [Edit("after", where(n, m.lines), f"{wrap.target} = DDP({wrap.target})") for n in again]
