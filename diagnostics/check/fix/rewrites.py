"""The rewrites `mgtutor check --fix` writes, one per rule (rules.py names each beside its finding).

Each takes the node a rule's matcher found and the script's model, and returns the edits (edits.py)
that remove the finding from the user's own lines, or None when this layout is one it does not know
(the finding is then listed as "fix by hand"). The names a fix writes are the script's own: `dist`
if it imported `torch.distributed as dist`, its rank variable if one is in scope.
"""
from __future__ import annotations

import ast

from mgtutor.diagnostics.check import call_facts
from mgtutor.diagnostics.check.fix.edit_model import Edit, where
from mgtutor.diagnostics.check.match.core import parameter_default
from mgtutor.diagnostics.check.script_model import (
    DEF_NODES, LEADER_NAME, ScriptModel, constant, dotted, has_star_kwargs, keyword, walk_local,
)

Edits = list[Edit] | None
GLOBAL_RANK_NAMES = ("rank", "global_rank", "world_rank")
SHORT_NAMES = {"torch.distributed": "dist"}   # how PyTorch's own docs spell it


# -- names the script already has ---------------------------------------------------------------
def module_name(m: ScriptModel, module: str, edits: list[Edit]) -> str:
    """How the script spells a module (`np` for numpy); adds `import module` when it has no name."""
    for name, full in m.aliases.items():
        if full == module:
            return name
    if module in m.aliases or module.split(".")[0] in _bound_names(m) - set(m.aliases):
        raise LookupError(module)  # the name is taken by something else: no fix
    short = SHORT_NAMES.get(module)
    if short and short not in m.aliases and short not in _bound_names(m):
        edits.append(Edit("import", code=f"import {module} as {short}"))
        return short
    edits.append(Edit("import", code=f"import {module}"))
    return module


def _bound_names(m: ScriptModel) -> set[str]:
    return {t.id for n in m.tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}


def cuda_available(m: ScriptModel, edits: list[Edit]) -> str:
    return f"{module_name(m, 'torch', edits)}.cuda.is_available()"


def statement_of(m: ScriptModel, node: ast.AST) -> ast.stmt | None:
    current: ast.AST | None = node
    while current is not None and not isinstance(current, ast.stmt):
        current = m.parent.get(current)
    return current


def inside(m: ScriptModel, node: ast.AST, ancestor: ast.AST) -> bool:
    """Whether `ancestor` encloses `node` in the tree."""
    current = m.parent.get(node)
    while current is not None:
        if current is ancestor:
            return True
        current = m.parent.get(current)
    return False


def alone_on_its_statement(m: ScriptModel, node: ast.AST) -> ast.stmt | None:
    """`print(x)` or `torch.save(...)` as a statement of its own (not inside a larger expression)."""
    stmt = statement_of(m, node)
    return stmt if isinstance(stmt, ast.Expr) and stmt.value is node else None


def scope_names(m: ScriptModel, node: ast.AST) -> set[str]:
    """Parameters and assigned names of the function around `node` (module names at top level),
    plus `self.x` attributes assigned anywhere in its class."""
    fn = m.enclosing(node, DEF_NODES)
    names: set[str] = set()
    body: list[ast.AST] = [m.tree] if fn is None else [fn]
    if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        names |= {a.arg for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs}
        owner = m.parent.get(fn)
        if isinstance(owner, ast.ClassDef):
            names |= {f"self.{n.attr}" for n in ast.walk(owner) if isinstance(n, ast.Attribute)
                      and isinstance(n.ctx, ast.Store) and dotted(n.value) == "self"}
    for scope in body:  # a function's own names, or the module's: never another function's locals
        for n in walk_local(scope):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                names.add(n.id)
    return names


def rank_zero_test(m: ScriptModel, node: ast.AST, edits: list[Edit], env: str = "RANK") -> str:
    """`rank == 0` with the script's own global-rank name in scope, else torchrun's environment."""
    if env == "RANK":
        in_scope = scope_names(m, node) | scope_names(m, m.tree)
        leader = sorted(n for n in in_scope if LEADER_NAME.match(n.removeprefix("self.").lower()))
        if leader:  # nanoGPT's `master_process`, `is_main_process`
            return leader[0]
        for name in GLOBAL_RANK_NAMES:
            for spelled in (name, f"self.{name}", f"ddp_{name}"):
                if spelled in in_scope:
                    return f"{spelled} == 0"
    if call_facts.spawn_targets(m):  # mp.spawn sets no RANK in the environment: only a name in scope tells
        raise LookupError("rank")
    return f'int({module_name(m, "os", edits)}.environ.get("{env}", "0")) == 0'


def text(m: ScriptModel, node: ast.AST) -> str:
    return m.segment(node)


# -- fixes ----------------------------------------------------------------------------------------
def set_device_from_local_rank(node: ast.AST, m: ScriptModel) -> Edits:
    """`torch.cuda.set_device(local_rank)` before init_process_group; on a GPU machine only."""
    init = next(iter(m.calls_to("torch.distributed.init_process_group")), None)
    stmt = statement_of(m, init) if init is not None else None
    if init is None or stmt is None:
        return None
    edits: list[Edit] = []
    try:
        local = next((n for n in ("local_rank", "self.local_rank") if n in scope_names(m, init)), None) or \
            f'int({module_name(m, "os", edits)}.environ["LOCAL_RANK"])'
        torch = module_name(m, "torch", edits)
    except LookupError:
        return None
    code = f"if {torch}.cuda.is_available():\n    {torch}.cuda.set_device({local})"
    return [*edits, Edit("before", where(stmt, m.lines), code)]


def map_location_cpu(node: ast.AST, m: ScriptModel) -> Edits:
    return [Edit("keyword", where(node, m.lines), '"cpu"', "map_location")] if isinstance(node, ast.Call) else None


def local_rank_from_env(node: ast.AST, m: ScriptModel) -> Edits:
    """`--local_rank` keeps working for the old launcher, and defaults to torchrun's LOCAL_RANK."""
    if not isinstance(node, ast.Call):
        return None
    edits: list[Edit] = []
    try:
        os_name = module_name(m, "os", edits)
    except LookupError:
        return None
    default = keyword(node, "default")
    old = text(m, default) if default is not None else "None"
    if keyword(node, "type") is not None:  # argparse passes a string default through `type`
        value = f'{os_name}.environ.get("LOCAL_RANK", {old})'
    elif type(constant(default)) is int:
        value = f'int({os_name}.environ.get("LOCAL_RANK", {old}))'
    else:
        return None
    return [*edits, Edit("keyword", where(node, m.lines), value, "default")]


def nccl_or_gloo(node: ast.AST, m: ScriptModel) -> Edits:
    if not isinstance(node, ast.Call):
        return None
    backend = keyword(node, "backend") or (node.args[0] if node.args else None)
    backend = parameter_default(m, backend) or backend  # `def setup(…, backend="nccl")`: the default
    if backend is None:
        return None
    edits: list[Edit] = []
    try:
        test = cuda_available(m, edits)
    except LookupError:
        return None
    quote = text(m, backend)[0]
    return [*edits, Edit("replace", where(backend, m.lines), f"{text(m, backend)} if {test} else {quote}gloo{quote}")]


def init_timeout(node: ast.AST, m: ScriptModel) -> Edits:
    if not isinstance(node, ast.Call):
        return None
    edits: list[Edit] = []
    if m.aliases.get("timedelta") == "datetime.timedelta":
        value = "timedelta(minutes=5)"
    else:
        try:
            value = f"{module_name(m, 'datetime', edits)}.timedelta(minutes=5)"
        except LookupError:
            return None
    return [*edits, Edit("keyword", where(node, m.lines), value, "timeout")]


def rank_zero_only(node: ast.AST, m: ScriptModel) -> Edits:
    """The print or save as it was, under `if rank == 0:`; not the one line of a helper that only
    prints (`def report(**f): print(...)`): whether each rank reports is its callers' choice."""
    stmt = alone_on_its_statement(m, node)
    if stmt is None or only_statement_of_a_helper(m, stmt):
        return None
    edits: list[Edit] = []
    try:
        test = rank_zero_test(m, node, edits)
    except LookupError:
        return None
    return [*edits, Edit("wrap", where(stmt, m.lines), test)]


def only_statement_of_a_helper(m: ScriptModel, stmt: ast.stmt) -> bool:
    fn = m.parent.get(stmt)
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    body = [s for s in fn.body if not (isinstance(s, ast.Expr) and isinstance(constant(s.value), str))]
    return body == [stmt]


def download_on_local_rank_zero(node: ast.AST, m: ScriptModel) -> Edits:
    """Download once per machine (local rank 0), wait at a barrier, then every rank opens the copy."""
    stmt = statement_of(m, node)
    flag = keyword(node, "download") if isinstance(node, ast.Call) else None
    if stmt is None or flag is None or not isinstance(stmt, (ast.Assign, ast.Expr)) or m.enclosing(node, DEF_NODES) \
            is None and not isinstance(m.parent.get(stmt), (ast.Module, ast.If)):
        return None
    edits: list[Edit] = []
    try:
        test = rank_zero_test(m, node, edits, env="LOCAL_RANK")
        dist = module_name(m, "torch.distributed", edits)
    except LookupError:
        return None
    code = (f"if {test}:\n    {text(m, node)}\n"
            f"if {dist}.is_initialized():\n    {dist}.barrier()")
    return [*edits, Edit("before", where(stmt, m.lines), code),
            Edit("keyword", where(node, m.lines), "False", "download")]


def drop_shuffle(node: ast.AST, m: ScriptModel) -> Edits:
    """DataLoader(sampler=…, shuffle=True) raises; the sampler does the shuffling."""
    return [Edit("drop_keyword", where(node, m.lines), name="shuffle")] if isinstance(node, ast.Call) else None


def distributed_sampler(node: ast.AST, m: ScriptModel) -> Edits:
    """The DataLoader reads this rank's shard: sampler=DistributedSampler(data, shuffle=<its shuffle>)
    and shuffle= gone (unsafe: each rank now trains on other samples than before)."""
    if not isinstance(node, ast.Call) or has_star_kwargs(node) or \
            m.calls_to("torch.utils.data.DistributedSampler", "torch.utils.data.distributed.DistributedSampler"):
        return None  # a sampler made elsewhere belongs to this loader: which one is the user's call
    dataset = node.args[0] if node.args else keyword(node, "dataset")
    if not isinstance(dataset, (ast.Name, ast.Attribute)):
        return None
    edits: list[Edit] = []
    name = next((n for n, full in m.aliases.items() if full.endswith(".DistributedSampler")), None)
    if name is None:
        if "DistributedSampler" in _bound_names(m):
            return None
        name = "DistributedSampler"
        edits.append(Edit("import", code="from torch.utils.data.distributed import DistributedSampler"))
    shuffle = keyword(node, "shuffle")
    at = where(node, m.lines)
    if shuffle is not None:
        edits.append(Edit("drop_keyword", at, name="shuffle"))
    value = f"{name}({text(m, dataset)}, shuffle={text(m, shuffle) if shuffle is not None else 'False'})"
    return [*edits, Edit("keyword", at, value, "sampler")]
