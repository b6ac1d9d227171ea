"""Facts that need the code a little further than one line: into a helper in the same file or a
project module (`utils.init_distributed_mode(args)`), up to the `mp.spawn` call, or to a `print`
replaced for every rank but rank 0. Each answers True, False, or None for "could not follow"."""
from __future__ import annotations

import ast
from typing import Callable, Sequence, TypeVar

from mgtutor.training.foundation.i18n import _

from mgtutor.diagnostics.check.script_model import (
    DEF_NODES, RANK_ENV_VARS, FunctionNode, ScriptModel, constant, dotted, identifier_parts, keyword, last_name,
)

MAX_DEPTH = 3
SETUP_WORDS = {"init", "setup", "initialize", "initialise", "launch"}
DIST_PARTS = {"dist", "distributed", "ddp", "multiprocessing"}
BUILTIN_PRINT = {"builtins.print", "__builtin__.print", "__builtins__.print"}
THIRD_PARTY_ROOTS = {"torch", "accelerate", "lightning", "pytorch_lightning", "deepspeed", "horovod", "os", "sys"}

Target = tuple[ScriptModel, ast.AST]
NodeTest = Callable[[ScriptModel, ast.AST], bool]   # a question asked of each node of a function
N = TypeVar("N", bound=ast.AST)


def resolve_function(m: ScriptModel, call: ast.Call) -> Target | None:
    """The def a call runs: a function of this file (by name), or one in a project module."""
    if isinstance(call.func, ast.Name) and call.func.id in m.functions:
        return m, m.functions[call.func.id][0]
    if isinstance(call.func, ast.Attribute) and isinstance(call.func.value, ast.Name) \
            and call.func.value.id == "self" and call.func.attr in m.functions:
        return m, m.functions[call.func.attr][0]
    full = m.resolve(call.func)
    if m.project is None or not full or "." not in full or full.split(".")[0] in THIRD_PARTY_ROOTS:
        return None
    return m.project.function(full)


def _reach(m: ScriptModel, fn: ast.AST, test: NodeTest, depth: int, seen: set[tuple[str, int]]) -> bool:
    """Whether `test(model, node)` holds for a node of `fn` or of a helper it calls (bounded)."""
    key = (m.filename, getattr(fn, "lineno", 0))
    if key in seen:
        return False
    seen.add(key)
    own, calls = _own_answer(m, fn, test)
    if own:
        return True
    if depth >= MAX_DEPTH:
        return False
    for call in calls:
        target = resolve_function(m, call)
        if target and _reach(target[0], target[1], test, depth + 1, seen):
            return True
    return False


def _own_answer(m: ScriptModel, fn: ast.AST, test: NodeTest) -> tuple[bool, list[ast.Call]]:
    """One walk of a function: does it hold the node itself, and which calls does it make.
    Remembered per project, since every file of a folder asks about the same helpers."""
    memo = m.project.memo if m.project is not None else {}
    key = (test.__name__, m.filename, getattr(fn, "lineno", 0))
    if key not in memo:
        calls: list[ast.Call] = []
        own = False
        for node in ast.walk(fn):
            own = own or test(m, node)
            if isinstance(node, ast.Call):
                calls.append(node)
        memo[key] = (own, calls)
    return memo[key]


def find_in_helper(m: ScriptModel, call: ast.Call, test: NodeTest, kind: type[N],
                   depth: int = 1) -> tuple[ScriptModel, N] | None:
    """The first node `test` accepts inside the function this call runs (or a helper it calls);
    `test` accepts only nodes of this kind."""
    target = resolve_function(m, call)
    if target is None or depth > MAX_DEPTH:
        return None
    model, fn = target
    own, calls = _own_answer(model, fn, test)
    if own:
        for node in ast.walk(fn):
            if isinstance(node, kind) and test(model, node):
                return model, node
        return None
    for inner in calls:
        found = find_in_helper(model, inner, test, kind, depth + 1)
        if found:
            return found
    return None


def _reads_rank_env(m: ScriptModel, node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value in RANK_ENV_VARS


def _replaces_print(m: ScriptModel, node: ast.AST) -> bool:
    if isinstance(node, ast.Assign):
        return any(m.resolve(t) in BUILTIN_PRINT or _sets_attr(t, "print") and "builtin" in (dotted(t) or "")
                   for t in node.targets)
    if isinstance(node, ast.Call) and last_name(node.func) == "setattr" and len(node.args) >= 2:
        return constant(node.args[1]) == "print" and "builtin" in (dotted(node.args[0]) or "")
    return False


def _sets_attr(target: ast.AST, name: str) -> bool:
    return isinstance(target, ast.Attribute) and target.attr == name


def call_reaches(m: ScriptModel, call: ast.Call, test: NodeTest) -> bool:
    """Whether the function this call runs (or a helper it calls) holds a node `test` accepts."""
    target = resolve_function(m, call)
    return bool(target) and _reach(target[0], target[1], test, 1, set())  # type: ignore[index]


def dict_keys(m: ScriptModel, name: ast.AST, depth: int = 0) -> set[str] | None:
    """The keys a dict passed as `**name` can hold, when every assignment and update of the name in its
    scope is a dict literal with constant keys (`{"batch_size": 8}`, `{…} if use_cuda else {}`, `.update({…})`
    or `.update(other)` of such a dict); None when any of them is not."""
    if not isinstance(name, ast.Name):
        return None
    scope = m.enclosing(name, DEF_NODES)
    keys: set[str] = set()
    for node in (ast.walk(scope) if scope is not None else m.nodes):
        values: list[ast.AST] = []
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name.id for t in node.targets):
            values = [node.value]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "update" \
                and isinstance(node.func.value, ast.Name) and node.func.value.id == name.id:
            values = list(node.args)
        for value in values:
            found = _literal_keys(m, value, depth)
            if found is None:
                return None
            keys |= found
    return keys


def _literal_keys(m: ScriptModel, value: ast.AST, depth: int) -> set[str] | None:
    if isinstance(value, ast.IfExp):
        a, b = _literal_keys(m, value.body, depth), _literal_keys(m, value.orelse, depth)
        return None if a is None or b is None else a | b
    if isinstance(value, ast.Dict) and all(isinstance(constant(k), str) for k in value.keys):
        return {constant(k) for k in value.keys}
    if isinstance(value, ast.Name) and depth < 2:
        return dict_keys(m, value, depth + 1)
    return None


def calls_reaching(m: ScriptModel, test: NodeTest) -> bool:
    """Whether any call of this file leads (through helpers) to a node `test` accepts."""
    seen: set[tuple[str, int]] = set()
    for call in m.calls:
        target = resolve_function(m, call)
        if target and _reach(target[0], target[1], test, 1, seen):
            return True
    return False


def helper_reads_rank_env(m: ScriptModel) -> bool:
    """A function this script calls (here or in a project module) reads RANK/LOCAL_RANK from the
    environment — timm's init_distributed_device, DINO's and MAE's init_distributed_mode."""
    return m.remember("helper_reads_rank_env", lambda: calls_reaching(m, _reads_rank_env))


def print_replaced(m: ScriptModel) -> bool:
    """`print` is not the builtin here: a module-level `def print`/`print = …`, or `builtins.print`
    replaced in this file or a helper it calls (`setup_for_distributed(is_master)`)."""
    def replaced() -> bool:
        local = any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == "print" or
                    isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "print" for t in n.targets)
                    for n in m.tree.body)
        return local or any(_replaces_print(m, n) for n in m.nodes) or calls_reaching(m, _replaces_print)
    return m.remember("print_replaced", replaced)


def project_calls(m: ScriptModel, method: str) -> bool:
    """A call of `.method(...)` in a helper this file calls, or in any project file read so far (in
    a folder check: every file of the project)."""
    def calls_method(model: ScriptModel, node: ast.AST) -> bool:
        return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == method \
            and not through_a_call(node)
    calls_method.__name__ = f"calls_{method}"
    if calls_reaching(m, calls_method):
        return True
    return m.project is not None and any(not through_a_call(c) for model in m.project.loaded()
                                         for c in model.method_calls(method))


def through_a_call(call: ast.Call) -> bool:
    """`enumerate(loader).sampler.set_epoch(epoch)`: a method of what enumerate()/tqdm() returned, which has
    no sampler (AttributeError when it runs); not the loader's own sampler."""
    receiver = call.func.value if isinstance(call.func, ast.Attribute) else None
    while isinstance(receiver, ast.Attribute):
        receiver = receiver.value
    return isinstance(receiver, ast.Call) and last_name(receiver.func) in ("enumerate", "tqdm", "zip", "iter")


def called_in_files_read(m: ScriptModel, name: str) -> bool:
    """Whether some file read (this one, or a project module) calls `name`: its callers are known."""
    models = m.project.loaded() if m.project is not None else []
    return any(last_name(c.func) == name for model in [m, *models] for c in model.calls)


def unread_setup_calls(m: ScriptModel) -> list[ast.Call]:
    """Calls to a distributed-setup helper whose code was not read (an installed package, a module
    outside the folder): what happens there — env reads, print replaced — is unknown."""
    found = []
    for call in m.calls:
        name = last_name(call.func) or ""
        parts = set(identifier_parts(name))
        full = m.resolve(call.func) or name
        if not (parts & SETUP_WORDS and parts & DIST_PARTS) or full.split(".")[0] in THIRD_PARTY_ROOTS:
            continue
        if resolve_function(m, call) is None:
            found.append(call)
    return found


def describe_call(m: ScriptModel, call: ast.Call) -> str:
    full = m.resolve(call.func) or dotted(call.func) or _("a helper")
    return _("{name}() (line {line})").format(name=full, line=call.lineno)


# -- mp.spawn: what runs in the launching process only --------------------------------------------
def spawn_targets(m: ScriptModel) -> list[FunctionNode]:
    return m.remember("spawn_targets", lambda: _find_spawn_targets(m))


def _find_spawn_targets(m: ScriptModel) -> list[FunctionNode]:
    targets: list[FunctionNode] = []
    for call in m.calls:
        if last_name(call.func) in ("spawn", "start_processes") and (m.resolve(call.func) or "").startswith(
                ("torch.multiprocessing", "mp.", "multiprocessing")) or _is_process_call(m, call):
            arg = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg in ("fn", "target")),
                                                      None)
            if isinstance(arg, ast.Name):
                targets += m.functions.get(arg.id, []) or _passed_as(m, call, arg.id)
    return targets


def _passed_as(m: ScriptModel, call: ast.Call, param: str) -> list[FunctionNode]:
    """`def run_demo(demo_fn, n): mp.spawn(demo_fn, …)` called as `run_demo(demo_basic, 8)`: the
    functions handed in through the parameter."""
    fn = m.enclosing(call, DEF_NODES)
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return []
    params = [a.arg for a in fn.args.args]
    if param not in params:
        return []
    index, found = params.index(param), []
    for caller in m.calls:
        if last_name(caller.func) == fn.name:
            arg = caller.args[index] if index < len(caller.args) else keyword(caller, param)
            if isinstance(arg, ast.Name):
                found += m.functions.get(arg.id, [])
    return found


def _is_process_call(m: ScriptModel, call: ast.Call) -> bool:
    return (m.resolve(call.func) or "").endswith(("multiprocessing.Process", "multiprocessing.spawn"))


def worker_functions(m: ScriptModel) -> set[FunctionNode]:
    """The spawn targets and every function of this file they call: the code each worker runs."""
    return m.remember("worker_functions", lambda: _find_worker_functions(m))


def _find_worker_functions(m: ScriptModel) -> set[FunctionNode]:
    reached: set[FunctionNode] = set()
    queue = list(spawn_targets(m))
    while queue:
        fn = queue.pop()
        if fn in reached:
            continue
        reached.add(fn)
        for node in ast.walk(fn):
            if isinstance(node, (ast.Name, ast.Attribute)):
                queue += m.functions.get(last_name(node), [])
                queue += [f for cls in m.classes.get(last_name(node), []) for f in cls.body
                          if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))]
    return reached


def in_spawn_parent(m: ScriptModel, node: ast.AST) -> bool:
    """With mp.spawn, code the workers never reach runs once, in the launching process: `main()`
    printing its config before `mp.spawn(worker, …)`, a download before the spawn."""
    if not spawn_targets(m):
        return False
    workers = worker_functions(m)
    current: ast.AST | None = node
    while current is not None:
        if current in workers:
            return False
        current = m.parent.get(current)
    fn = m.enclosing(node, DEF_NODES)
    if fn is not None:
        return True
    return _under_main_guard(m, node)


def _under_main_guard(m: ScriptModel, node: ast.AST) -> bool:
    current = m.parent.get(node)
    while current is not None:
        if isinstance(current, ast.If) and "__main__" in ast.dump(current.test):
            return True
        current = m.parent.get(current)
    return False


def assigned_before(m: ScriptModel, name: ast.Name) -> ast.AST | None:
    """The value last assigned to this name before its line, in the same function."""
    scope = m.enclosing(name, DEF_NODES)
    best = None
    for node in (ast.walk(scope) if scope is not None else m.nodes):
        if isinstance(node, ast.Assign) and node.lineno < name.lineno and (best is None or node.lineno > best.lineno):
            for target in node.targets:
                if isinstance(target, ast.Name) and target.id == name.id or isinstance(target, ast.Tuple) and any(
                        isinstance(e, ast.Name) and e.id == name.id for e in target.elts):
                    best = node
    return best.value if best is not None else None


def per_rank_path(m: ScriptModel, exprs: Sequence[ast.AST]) -> bool:
    """A file name built from the rank (`f"queue{rank}.pth"`, or a name assigned one): each rank
    has its own file, so saving or loading it on every rank is the point."""
    def ranked(node: ast.AST | None) -> bool:
        return node is not None and any(m.is_rank_test(n) for n in ast.walk(node)
                                        if isinstance(n, (ast.Name, ast.Attribute, ast.Call, ast.Subscript)))
    return any(ranked(e) or any(isinstance(n, ast.Name) and ranked(assigned_before(m, n)) for n in ast.walk(e))
               for e in exprs)


def rank_tagged_names(m: ScriptModel) -> set[str]:
    """Names holding text built from the rank — `device = f"cuda:{local_rank}"` — so a print of
    them says which rank speaks."""
    def tagged() -> set[str]:
        names: set[str] = set()
        for node in m.nodes:
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.JoinedStr) and any(
                    isinstance(v, ast.FormattedValue) and m.is_rank_test(v.value) for v in node.value.values):
                names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        return names
    return m.remember("rank_tagged_names", tagged)


def mentions_pid(nodes: Sequence[ast.AST]) -> bool:
    """`print(f"[{os.getpid()}] …")` tags each process's lines: they can be told apart."""
    return any(isinstance(n, ast.Call) and last_name(n.func) == "getpid" for node in nodes for n in ast.walk(node))


def tagged_output(m: ScriptModel, nodes: Sequence[ast.AST]) -> bool:
    """The printed text names its process: a pid, or text built from the rank."""
    tagged = rank_tagged_names(m)
    return mentions_pid(nodes) or any(isinstance(n, ast.Name) and n.id in tagged
                                      for node in nodes for n in ast.walk(node))
