"""What the diagnosis of a failed run asks of the script that ran, read statically like every check (the
script is parsed, never imported): where the backend given to init_process_group comes from and how the
script's own command line changes it, where the script sets the rendezvous address itself, and whether it
starts processes of its own (mp.spawn).

    model = script_model(Path("train.py"))          # None when it cannot be read or parsed
    source = backend_source(model, 84)              # the init call on line 84: variable, its line, override
    settings = env_settings(model, ("MASTER_ADDR", "MASTER_PORT"))
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from typing import TYPE_CHECKING

from mgtutor.diagnostics.check.match.core import INIT, SPAWN
from mgtutor.diagnostics.check.script_model import ScriptModel, constant, keyword, last_name
from mgtutor.training.foundation.safe_io import read_regular

if TYPE_CHECKING:
    from mgtutor.diagnostics.check.script_options import ScriptOption

MAX_CONFIGURATOR = 200_000  # bytes: a configurator is a page of code


@dataclass(frozen=True)
class Assignment:
    """One line of the script that gives a name (or an environment variable) its value."""
    name: str
    line: int
    code: str
    value: object = None  # the constant assigned, else None


@dataclass(frozen=True)
class Override:
    """How the script's own command line changes a value: `--backend=gloo` (a configurator that reads
    --key=value) or `--backend gloo` (argparse)."""
    how: str  # "configurator" | "argparse"
    line: int  # the exec of the configurator, or the add_argument
    code: str
    flag: str  # the option as a command line writes it, without its value

    def arguments(self, value: str) -> list[str]:
        return [f"{self.flag}={value}"] if self.how == "configurator" else [self.flag, value]


@dataclass(frozen=True)
class BackendSource:
    """The backend of an init_process_group call that names it through a variable."""
    variable: str  # as the call spells it: `backend`, `args.backend`
    assignment: Assignment | None  # where its default is set
    override: Override | None


def script_model(path: Path) -> ScriptModel | None:
    # check's rules (and LibCST with them) load only when a diagnosis reads a script: the classifier stays light
    from mgtutor.diagnostics.check.script import CheckError, decode_source, parse, read_script

    try:
        text = decode_source(read_script(path), str(path))
        return ScriptModel(parse(text, str(path)), text, str(path))
    except (CheckError, RecursionError):
        return None


def code_at(model: ScriptModel, node: ast.AST) -> str:
    """The statement as written, without a comment after it; a statement over several lines: its first."""
    segment = ast.get_source_segment(model.source, node)
    if segment and "\n" not in segment:
        return segment.strip()
    return model.line(getattr(node, "lineno", 0)).strip()


def init_calls(model: ScriptModel) -> list[ast.Call]:
    return model.calls_to(*INIT)


def spawn_calls(model: ScriptModel) -> list[ast.Call]:
    return model.calls_to(*SPAWN, bare=False)


def _call_on(calls: list[ast.Call], line: int) -> ast.Call | None:
    return next((c for c in calls if c.lineno <= line <= (c.end_lineno or c.lineno)), None)


def backend_source(model: ScriptModel, line: int, path: Path | None = None) -> BackendSource | None:
    """The variable the init_process_group call on `line` takes its backend from; None when the call
    writes the backend as a constant (or there is no such call)."""
    call = _call_on(init_calls(model), line)
    if call is None:
        return None
    arg = keyword(call, "backend") or (call.args[0] if call.args else None)
    if isinstance(arg, ast.Name):
        assignment = last_assignment(model, arg.id, call.lineno)
        via = _option_of(model, assignment, path)  # `backend = args.backend`
        override = via[1] if via else _configurator(model, arg.id, assignment, call.lineno, path)
        return BackendSource(arg.id, via[0] if via else assignment, override)
    if isinstance(arg, ast.Attribute):
        option = _option(model, arg.attr, path)
        if option is None:
            return BackendSource(ast.unparse(arg), None, None)
        return BackendSource(ast.unparse(arg), _default_of(model, option), _argparse(model, option))
    return None


def last_assignment(model: ScriptModel, name: str, before: int) -> Assignment | None:
    """The last plain assignment `name = …` above line `before`, in the script's own code."""
    found = None
    for node in model.nodes:
        if isinstance(node, ast.Assign) and node.lineno < before and any(
                isinstance(t, ast.Name) and t.id == name for t in node.targets):
            if found is None or node.lineno > found.lineno:
                found = node
    if found is None:
        return None
    return Assignment(name, found.lineno, code_at(model, found), constant(found.value))


def _option_of(model: ScriptModel, assignment: Assignment | None,
               path: Path | None) -> tuple[Assignment | None, Override] | None:
    """`backend = args.backend`: the argparse option behind the variable, and its default."""
    if assignment is None:
        return None
    node = next((n for n in model.nodes if isinstance(n, ast.Assign) and n.lineno == assignment.line), None)
    if node is None or not isinstance(node.value, ast.Attribute):
        return None
    option = _option(model, node.value.attr, path)
    return (_default_of(model, option), _argparse(model, option)) if option else None


def _option(model: ScriptModel, dest: str, path: Path | None) -> ScriptOption | None:
    from mgtutor.diagnostics.check.script import CheckError
    from mgtutor.diagnostics.check.script_options import script_options

    try:
        options = script_options(path or Path(model.filename))
    except CheckError:
        return None
    return next((o for o in options if o.dest == dest), None)


def _default_of(model: ScriptModel, option: ScriptOption) -> Assignment:
    return Assignment(option.dest, option.line, model.line(option.line).strip(), option.default)


def _argparse(model: ScriptModel, option: ScriptOption) -> Override:
    return Override("argparse", option.line, model.line(option.line).strip(), option.flag)


def _configurator(model: ScriptModel, name: str, assignment: Assignment | None, before: int,
                  path: Path | None) -> Override | None:
    """nanoGPT's shape: `exec(open('configurator.py').read())` between the default and the call, running a
    file that sets the script's globals from `--key=value` arguments."""
    if assignment is None:
        return None
    for call in model.calls:
        if not (last_name(call.func) == "exec" and assignment.line < call.lineno < before and call.args):
            continue
        opened = next((n for n in ast.walk(call.args[0]) if isinstance(n, ast.Call) and last_name(n.func) == "open"
                       and n.args and isinstance(constant(n.args[0]), str)), None)
        if opened is not None and _reads_key_value(Path(model.filename).parent, str(constant(opened.args[0])), path):
            return Override("configurator", call.lineno, code_at(model, call), f"--{name}")
    return None


def _reads_key_value(folder: Path, name: str, path: Path | None) -> bool:
    """Whether the exec'd file sets globals from `--key=value` (it reads sys.argv and splits on '=')."""
    for where in ([path.parent] if path else []) + [folder]:
        try:
            text = read_regular(where / name, MAX_CONFIGURATOR).decode("utf-8", "replace")
        except OSError:
            continue
        return "sys.argv" in text and ("split('=')" in text or 'split("=")' in text) and "globals()" in text
    return False


def env_settings(model: ScriptModel, names: tuple[str, ...]) -> list[Assignment]:
    """Where the script sets these environment variables itself: `os.environ["X"] = …`,
    `os.environ.setdefault("X", …)`, `os.putenv("X", …)`, in line order."""
    found = []
    for node in model.nodes:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Subscript) \
                and constant(node.targets[0].slice) in names and "environ" in ast.unparse(node.targets[0].value):
            found.append(Assignment(str(constant(node.targets[0].slice)), node.lineno, code_at(model, node),
                                    constant(node.value)))
        elif isinstance(node, ast.Call) and last_name(node.func) in ("setdefault", "putenv") and len(node.args) == 2 \
                and constant(node.args[0]) in names:
            found.append(Assignment(str(constant(node.args[0])), node.lineno, code_at(model, node),
                                    constant(node.args[1])))
    return sorted(found, key=lambda a: a.line)


def tcp_init_methods(model: ScriptModel) -> list[Assignment]:
    """`init_process_group(init_method="tcp://HOST:PORT")` calls whose address is written in the script."""
    out = []
    for call in init_calls(model):
        method = constant(keyword(call, "init_method"))
        if isinstance(method, str) and method.startswith("tcp://"):
            out.append(Assignment("init_method", call.lineno, code_at(model, call), method))
    return out


@dataclass(frozen=True)
class InitBranch:
    """An `if` that decides whether an init_process_group call runs: in its body (`runs_when` True) or
    its else branch (False); through a function the `if` calls (`via`: `setup()` at that line)."""
    init_line: int
    node: ast.If
    runs_when: bool
    via: Assignment | None = None

    @property
    def line(self) -> int:
        return self.node.lineno


def init_branches(model: ScriptModel) -> list[InitBranch]:
    """Every init_process_group call's nearest deciding `if`, in its own function or, when the whole
    function is the call, around the calls of that function in the script."""
    out = []
    for call in init_calls(model):
        branch = _deciding_if(model, call)
        if branch is not None:
            out.append(InitBranch(call.lineno, branch[0], branch[1]))
            continue
        function = model.enclosing(call, (ast.FunctionDef, ast.AsyncFunctionDef))
        for use in model.calls:
            if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)) and last_name(use.func) == function.name:
                around = _deciding_if(model, use)
                if around is not None:
                    via = Assignment(function.name, use.lineno, code_at(model, use))
                    out.append(InitBranch(call.lineno, around[0], around[1], via))
    return out


def _deciding_if(model: ScriptModel, node: ast.AST) -> tuple[ast.If, bool] | None:
    child, parent = node, model.parent.get(node)
    while parent is not None and not isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda,
                                                         ast.ClassDef)):
        if isinstance(parent, ast.If) and child is not parent.test and not _main_guard(parent.test):
            return parent, child in parent.body
        child, parent = parent, model.parent.get(parent)
    return None


def _main_guard(test: ast.expr) -> bool:
    """`if __name__ == "__main__":` holds whenever a launcher runs the script."""
    return isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and test.left.id == "__name__"
