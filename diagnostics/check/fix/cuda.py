"""The rewrite for `cuda-required`: every place that needs a GPU keeps its GPU code and gains the CPU
branch, so on a GPU machine nothing changes and on a CPU one the script runs (on gloo).

- The device is computed once per function: sites that index the GPU by the same rank name, or use the
  current GPU (`.cuda()`, `.cuda(non_blocking=True)`), get one `device = torch.device(…) if … else …`,
  right after the rank is set (or first thing in the function), and use it.
- The GPU index is the local rank: a site indexed by the global rank (RANK, `dist.get_rank()`) gets
  LOCAL_RANK instead, the same number on one node, so the rank-as-device bug is not copied into the patch
  (not under mp.spawn, whose index is the local one already and which sets no LOCAL_RANK).
- `torch.cuda.device_count()` used as the number of processes to spawn becomes `… or 2`: on a CPU,
  `mp.spawn(nprocs=device_count())` starts two gloo processes (as `mgtutor run` does there) instead of none,
  so the script still runs as a distributed job. Used as a divisor it becomes `max(1, …)`: nothing divides by zero.
"""
from __future__ import annotations

import ast

from mgtutor.diagnostics.check import call_facts
from mgtutor.diagnostics.check.fix.edit_model import Edit, where
from mgtutor.diagnostics.check.fix.rewrites import (
    Edits, cuda_available, inside, module_name, scope_names, statement_of, text,
)
from mgtutor.diagnostics.check.match.cuda import cuda_sites
from mgtutor.diagnostics.check.match.identity import _device_uses, _unwrap_int, global_rank_names
from mgtutor.diagnostics.check.script_model import DEF_NODES, ScriptModel, constant, last_name

CURRENT = ""   # the group of sites that use the current GPU (`.cuda()`), not an index


class Names:
    """What the edits spell: torch, the CUDA test, and the GPU index for a rank name."""

    def __init__(self, m: ScriptModel, edits: list[Edit]) -> None:
        self.m, self.edits = m, edits
        self.avail = cuda_available(m, edits)
        self.torch = module_name(m, "torch", edits)
        self.global_ranks = global_rank_names(m) if not call_facts.spawn_targets(m) else set()

    def index(self, node: ast.AST | str) -> str:
        """The GPU index to write for `node` (or a name spelled so): LOCAL_RANK where the script wrote its
        global rank."""
        spelled = node if isinstance(node, str) else text(self.m, node)
        if spelled.split(".")[-1] in self.global_ranks:
            return f'int({module_name(self.m, "os", self.edits)}.environ["LOCAL_RANK"])'
        return spelled


def cuda_fallback(node: ast.AST, m: ScriptModel) -> Edits:
    edits: list[Edit] = []
    try:
        names = Names(m, edits)
    except LookupError:
        return None
    placed: list[ast.AST] = []
    sites = cuda_sites(m)
    shared = _shared_devices(m, sites, names)
    for site, label in sites:
        if any(site is not p and inside(m, site, p) for p in placed):
            continue
        edit = _device_name_edit(m, site, label, shared) or _site_edit(m, site, label, names)
        if edit is not None:
            edits.append(edit)
            placed.append(site)
    return edits if placed else None


def _rank_index(m: ScriptModel, site: ast.AST, label: str) -> str | None:
    """The group a site belongs to: the rank name it indexes the GPU by (`x.to(local_rank)`,
    `model.cuda(gpu)`), CURRENT for the current GPU (`x.cuda()`), None for the others."""
    if label.startswith(".to(") and isinstance(site, (ast.Name, ast.Attribute)):
        return text(m, site)
    if label == ".cuda()" and isinstance(site, ast.Call) and all(k.arg for k in site.keywords):
        if not site.args:
            return CURRENT
        if len(site.args) == 1 and isinstance(site.args[0], (ast.Name, ast.Attribute)):
            return text(m, site.args[0])
    return None


def _groups(m: ScriptModel, sites: list[tuple[ast.AST, str]]) -> dict[tuple[int, str], list[ast.AST]]:
    """Sites by (scope, rank name); the current-GPU sites of a scope join its rank group when that scope
    pins the process to that rank's GPU (`torch.cuda.set_device(rank)`: then `.cuda()` is that GPU)."""
    groups: dict[tuple[int, str], list[ast.AST]] = {}
    pinned: dict[int, str] = {}
    for site, label in sites:
        scope = m.enclosing(site, DEF_NODES) or m.tree
        if label == "torch.cuda.set_device" and isinstance(site, ast.Call) and len(site.args) == 1:
            pinned[id(scope)] = text(m, site.args[0])
        index = _rank_index(m, site, label)
        if index is not None:
            groups.setdefault((id(scope), index), []).append(site)
    for (scope_id, index), group in list(groups.items()):
        rank = pinned.get(scope_id)
        if index == CURRENT and rank is not None and (scope_id, rank) in groups:
            groups[(scope_id, rank)] += groups.pop((scope_id, CURRENT))
    return groups


def _shared_devices(m: ScriptModel, sites: list[tuple[ast.AST, str]], names: Names) -> dict[int, str]:
    """One device per group of two or more sites, computed once right after the rank is set (or at the
    top of the function whose parameter it is, or of the function for the current GPU). Returns the
    name to write at each such site (by id); the edit that computes it is appended to names.edits."""
    shared: dict[int, str] = {}
    for (_scope, rank), group in _groups(m, sites).items():
        if len(group) < 2:
            continue
        first = min(group, key=lambda g: getattr(g, "lineno", 0))
        anchor = _anchor(m, first, rank)
        holder = m.parent.get(anchor[1]) if anchor else None
        if anchor is None or not all(inside(m, g, holder) for g in group):  # type: ignore[arg-type]
            continue
        taken = scope_names(m, first) | {n.id for n in m.nodes if isinstance(n, ast.Name)}
        name = next(n for n in ("device", "rank_device", "local_device", "cuda_or_cpu") if n not in taken)
        torch, avail = names.torch, names.avail
        index = names.index(rank) if rank else ""
        value = (f'{torch}.device("cuda", {index}) if {avail} else {torch}.device("cpu")' if rank
                 else f'{torch}.device("cuda" if {avail} else "cpu")')
        names.edits.append(Edit(anchor[0], where(anchor[1], m.lines), f"{name} = {value}"))
        shared.update({id(g): name for g in group})
    return shared


def _anchor(m: ScriptModel, first: ast.AST, rank: str) -> tuple[str, ast.stmt] | None:
    """Where the shared device is computed: after `rank = …`, or first in the function (its parameter, or
    the current GPU), or before the module-level statement of the first site."""
    scope = m.enclosing(first, DEF_NODES) or m.tree
    if rank:
        found = _rank_assignment(m, first, rank, scope)
        if found is not None or not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return _not_reassigned(m, found, rank, first, scope)
        params = [a.arg for a in scope.args.posonlyargs + scope.args.args]
        if rank not in params and not (rank.startswith("self.") and "self" in params):
            return None  # `self.gpu_id`, set in __init__: known when any method runs
    if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
        body = [b for b in scope.body if not (isinstance(b, ast.Expr) and isinstance(constant(b.value), str))]
        return _not_reassigned(m, ("before", body[0]), rank, first, scope) if body else None
    top = statement_of(m, first)
    while top is not None and m.parent.get(top) is not m.tree:
        top = m.parent.get(top)  # type: ignore[assignment]
    return ("before", top) if isinstance(top, ast.stmt) else None


def _not_reassigned(m: ScriptModel, anchor: tuple[str, ast.stmt] | None, rank: str, first: ast.AST,
                    scope: ast.AST) -> tuple[str, ast.stmt] | None:
    if anchor is None or not rank:
        return anchor
    stored = [n for n in ast.walk(scope) if isinstance(n, (ast.Name, ast.Attribute)) and text(m, n) == rank
              and isinstance(n.ctx, ast.Store) and anchor[1].lineno < n.lineno < getattr(first, "lineno", 0)]
    return None if stored else anchor


def _rank_assignment(m: ScriptModel, site: ast.AST, rank: str, scope: ast.AST) -> tuple[str, ast.stmt] | None:
    """The nearest `rank = …` statement before `site` in a block that encloses it, within its scope."""
    child: ast.AST | None = statement_of(m, site)
    parent = m.parent.get(child) if child is not None else None
    while child is not None and parent is not None:
        for field in ("body", "orelse", "finalbody"):
            block = getattr(parent, field, None)
            if isinstance(block, list) and child in block:
                for stmt in reversed(block[:block.index(child)]):
                    if isinstance(stmt, ast.Assign) and any(text(m, t) == rank for t in stmt.targets):
                        return "after", stmt
        if parent is scope:
            return None
        child, parent = parent, m.parent.get(parent)
    return None


def _device_name_edit(m: ScriptModel, site: ast.AST, label: str, shared: dict[int, str]) -> Edit | None:
    name = shared.get(id(site))
    if name is None:
        return None
    if label.startswith(".to("):
        return Edit("replace", where(site, m.lines), name)
    assert isinstance(site, ast.Call) and isinstance(site.func, ast.Attribute)
    rest = [f"{k.arg}={text(m, k.value)}" for k in site.keywords if k.arg]
    return Edit("replace", where(site, m.lines), f"{text(m, site.func.value)}.to({', '.join([name, *rest])})")


def _spawn_count(m: ScriptModel, site: ast.AST) -> bool:
    """`nprocs=device_count()`, or `n = device_count()` with `nprocs=n` in the same function."""
    parent = m.parent.get(site)
    if isinstance(parent, ast.keyword):
        return parent.arg == "nprocs"
    if not (isinstance(parent, ast.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0], ast.Name)):
        return False
    scope = m.enclosing(site, DEF_NODES) or m.tree
    return any(isinstance(kw, ast.keyword) and kw.arg == "nprocs" and isinstance(kw.value, ast.Name) and
               kw.value.id == parent.targets[0].id for kw in ast.walk(scope))


def _site_edit(m: ScriptModel, site: ast.AST, label: str, names: Names) -> Edit | None:
    at, code, torch, avail = where(site, m.lines), text(m, site), names.torch, names.avail
    if label == "device_count()":
        return Edit("replace", at, f"{code} or 2" if _spawn_count(m, site) else f"max(1, {code})")
    if label == "torch.cuda.set_device":
        stmt = statement_of(m, site)
        if not (isinstance(stmt, ast.Expr) and stmt.value is site and isinstance(site, ast.Call)):
            return None
        if len(site.args) == 1 and names.index(site.args[0]) != text(m, site.args[0]):
            return Edit("statement", where(stmt, m.lines),
                        f"if {avail}:\n    {text(m, site.func)}({names.index(site.args[0])})")
        return Edit("wrap", where(stmt, m.lines), avail)
    if label == ".cuda()" and isinstance(site, ast.Call) and isinstance(site.func, ast.Attribute):
        receiver = text(m, site.func.value)
        index = [names.index(a) for a in site.args]
        device = f'{torch}.device("cuda", {index[0]}) if {avail} else "cpu"' if index else f'"cuda" if {avail} else "cpu"'
        rest = [f"{k.arg}={text(m, k.value)}" for k in site.keywords if k.arg]
        return Edit("replace", at, f"{receiver}.to({', '.join([device, *rest])})")
    if label.startswith(".to("):
        return Edit("replace", at, f'{torch}.device("cuda", {names.index(site)}) if {avail} else "cpu"')
    if label in ("device_ids=", "output_device="):
        if isinstance(site, ast.List) and len(site.elts) == 1:
            code = f"[{names.index(site.elts[0])}]"
        elif label == "output_device=":
            code = names.index(site)
        return Edit("replace", at, f"{code} if {avail} else None")
    if label.startswith("torch.device") and isinstance(site, ast.Call) and len(site.args) == 2:
        code = f"{text(m, site.func)}({text(m, site.args[0])}, {names.index(site.args[1])})"
    parent = m.parent.get(site)
    wrapped = f'{code} if {avail} else "cpu"' if label.startswith(('f"', '"cuda')) \
        else f'{code} if {avail} else {torch}.device("cpu")'
    if isinstance(parent, (ast.Attribute, ast.Subscript, ast.BinOp, ast.Compare)):
        wrapped = f"({wrapped})"
    return Edit("replace", at, wrapped)


def local_rank_device(node: ast.AST, m: ScriptModel) -> Edits:
    """The rewrite for `rank-as-device`: the GPU index becomes the local rank (a `local_rank` in scope, else
    LOCAL_RANK from the environment). On one node the two are the same number, so nothing changes where the
    script already ran; on the second node each rank gets a GPU that exists. Not under mp.spawn (no LOCAL_RANK
    there: the spawn index is the local rank, and which one the script means is for the user)."""
    if call_facts.spawn_targets(m):
        return None
    index = next((_unwrap_int(i) for use, i, _label in _device_uses(m) if use is node), None)
    if index is None:
        return None
    edits: list[Edit] = []
    local = next((n for n in sorted(scope_names(m, node)) if n.split(".")[-1] == "local_rank"), None)
    try:
        local = local or f'int({module_name(m, "os", edits)}.environ["LOCAL_RANK"])'
    except LookupError:
        return None
    return [*edits, Edit("replace", where(index, m.lines), local)]
