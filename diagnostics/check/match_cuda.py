"""Two rules about where a distributed script runs, each with its rewrite beside it:

- `cuda-required`: the script asks for CUDA (`set_device`, `.cuda()`, `.to(local_rank)`, `device_ids`)
  with no `torch.cuda.is_available()` in reach, so on a machine without a GPU it fails there
  whatever backend the launcher was given. The fix keeps every GPU line and adds the CPU branch.
- `world-set-by-script`: under torchrun the script overwrites WORLD_SIZE/RANK/LOCAL_RANK, or hands
  its own world_size=/rank= to init_process_group; ranks then disagree about the world and wait for
  peers that never come.
"""
from __future__ import annotations

import ast
from typing import Iterator

from mgtutor.diagnostics.check import call_facts
from mgtutor.diagnostics.check.edits import Edit, where
from mgtutor.diagnostics.check.fixes import Edits, cuda_available, inside, module_name, scope_names, statement_of, text
from mgtutor.diagnostics.check.match import DDP, INIT, Hits, _under_cuda_test, manual_ddp
from mgtutor.diagnostics.check.script_model import DEF_NODES, ScriptModel, constant, keyword, last_name
from mgtutor.training.foundation.i18n import _

WORLD_VARS = ("WORLD_SIZE", "RANK", "LOCAL_RANK")


def cuda_sites(m: ScriptModel) -> list[tuple[ast.AST, str]]:
    """Each place that needs a GPU, with how the user wrote it; not those already under a test of
    CUDA (`if torch.cuda.is_available():`, `… if use_cuda else …`)."""
    sites: list[tuple[ast.AST, str]] = []
    ddp = {id(c) for c in m.calls_to(*DDP)}
    for call in m.calls:
        name = last_name(call.func)
        if m.resolve(call.func) == "torch.cuda.set_device":
            sites.append((call, "torch.cuda.set_device"))
        elif name == "cuda" and isinstance(call.func, ast.Attribute) and m.resolve(call.func.value) != "torch":
            sites.append((call, ".cuda()"))
        elif name == "to" and call.args and _is_rank_device(m, call.args[0]):
            sites.append((call.args[0], f".to({text(m, call.args[0])})"))
        elif m.resolve(call.func) == "torch.device" and call.args and constant(call.args[0]) == "cuda":
            sites.append((call, "torch.device(\"cuda\", …)"))
        if id(call) in ddp:
            for kw in ("device_ids", "output_device"):
                value = keyword(call, kw)
                if value is not None and not isinstance(value, ast.Constant) and not _all_constants(value):
                    sites.append((value, f"{kw}="))
    for node in m.nodes:
        if isinstance(node, ast.JoinedStr) and node.values and str(constant(node.values[0], "")).startswith("cuda:"):
            sites.append((node, 'f"cuda:{…}"'))
    return [(n, label) for n, label in sorted(sites, key=lambda s: (s[0].lineno, s[0].col_offset))  # type: ignore[attr-defined]
            if not _guarded(m, n) and not _handed_to_a_chooser(m, n)]


def _handed_to_a_chooser(m: ScriptModel, node: ast.AST) -> bool:
    """`device = torch.device("cuda")`, later `device = ddp_setup(device)` where ddp_setup (a function of
    this file) asks torch.cuda.is_available() itself: the device is only a wish, nothing runs on it."""
    stmt = statement_of(m, node)
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)):
        return False
    name = stmt.targets[0].id
    for later in m.nodes:
        if isinstance(later, ast.Assign) and later.lineno > stmt.lineno and isinstance(later.value, ast.Call) \
                and [text(m, t) for t in later.targets] == [name] and [text(m, a) for a in later.value.args] == [name]:
            chooser = m.functions.get(last_name(later.value.func) or "", [])
            return any(isinstance(n, ast.Attribute) and n.attr == "is_available" for fn in chooser for n in ast.walk(fn))
    return False


def _is_rank_device(m: ScriptModel, node: ast.AST) -> bool:
    return isinstance(node, (ast.Name, ast.Attribute)) and m._is_rank_source(node) and \
        "device" not in (last_name(node) or "").lower()


def _all_constants(node: ast.AST) -> bool:
    return isinstance(node, (ast.List, ast.Tuple)) and all(isinstance(e, ast.Constant) for e in node.elts)


def _guarded(m: ScriptModel, node: ast.AST) -> bool:
    """Under a test of CUDA, or on a line that chooses by one (`[r] if device.type == "cuda" else None`)."""
    stmt = statement_of(m, node)
    current = m.parent.get(node)
    while current is not None:  # `if use_cuda:`, `if gpus_enough:`, `if device.type == "cuda":`
        if isinstance(current, (ast.If, ast.IfExp, ast.While)) and _mentions_cuda(current.test):
            return True
        current = m.parent.get(current)
    return _under_cuda_test(m, node) or any(
        isinstance(n, ast.Attribute) and n.attr in ("is_available", "device_count") or
        isinstance(n, ast.IfExp) and _mentions_cuda(n.test) for n in ast.walk(stmt or node))


def _mentions_cuda(test: ast.AST) -> bool:
    return any(constant(n) == "cuda" or "cuda" in (last_name(n) or "").lower() or "gpu" in (last_name(n) or "").lower()
               for n in ast.walk(test) if isinstance(n, (ast.Constant, ast.Name, ast.Attribute)))


def cuda_required(m: ScriptModel) -> Hits:
    if not (manual_ddp(m) or call_facts.spawn_targets(m)):
        return
    if call_facts.unread_setup_calls(m):
        return  # the setup happens in code not read, which may well pick the device
    sites = cuda_sites(m)
    if sites:
        shown = ", ".join(_("{code} (line {line})").format(code=label, line=n.lineno)  # type: ignore[attr-defined]
                          for n, label in sites[:4])
        more = _(" and {count} more").format(count=len(sites) - 4) if len(sites) > 4 else ""
        yield sites[0][0], _("the script needs CUDA with no CPU fallback: {sites}{more}").format(sites=shown, more=more)


def cuda_fallback(node: ast.AST, m: ScriptModel) -> Edits:
    """Every site keeps its GPU code and gains the CPU branch: on a GPU machine nothing changes."""
    edits: list[Edit] = []
    try:
        avail = cuda_available(m, edits)
        torch = module_name(m, "torch", edits)
    except LookupError:
        return None
    placed: list[ast.AST] = []
    sites = cuda_sites(m)
    shared = _shared_devices(m, sites, avail, torch, edits)
    for site, label in sites:
        if any(site is not p and inside(m, site, p) for p in placed):
            continue
        edit = _device_name_edit(m, site, label, shared) or _site_edit(m, site, label, avail, torch)
        if edit is not None:
            edits.append(edit)
            placed.append(site)
    return edits if placed else None


def _rank_index(m: ScriptModel, site: ast.AST, label: str) -> ast.Name | None:
    """The rank name a site puts the GPU index from: `x.to(local_rank)`, `model.cuda(local_rank)`."""
    if label.startswith(".to(") and isinstance(site, ast.Name):
        return site
    if label == ".cuda()" and isinstance(site, ast.Call) and len(site.args) == 1 and not site.keywords \
            and isinstance(site.args[0], ast.Name):
        return site.args[0]
    return None


def _shared_devices(m: ScriptModel, sites: list[tuple[ast.AST, str]], avail: str, torch: str,
                    edits: list[Edit]) -> dict[int, str]:
    """Two or more sites of one scope that index the GPU by the same rank name get one device, computed
    once right after that name is set (or at the top of the function whose parameter it is): `device =
    torch.device("cuda", local_rank) if torch.cuda.is_available() else torch.device("cpu")`. Returns the
    name to write at each such site (by id); the edit that computes it is appended to `edits`."""
    groups: dict[tuple[int, str], list[ast.AST]] = {}
    for site, label in sites:
        index = _rank_index(m, site, label)
        if index is not None:
            scope = m.enclosing(site, DEF_NODES) or m.tree
            groups.setdefault((id(scope), index.id), []).append(site)
    names: dict[int, str] = {}
    for (_scope, rank), group in groups.items():
        if len(group) < 2:
            continue
        scope = m.enclosing(group[0], DEF_NODES) or m.tree
        body = getattr(scope, "body", [])
        first = min(getattr(g, "lineno", 0) for g in group)
        anchor = _rank_assignment(m, min(group, key=lambda g: getattr(g, "lineno", 0)), rank, scope)
        params = [a.arg for a in scope.args.posonlyargs + scope.args.args] \
            if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)) else []
        if anchor is None and rank in params:
            stmts = [b for b in body if not (isinstance(b, ast.Expr) and isinstance(constant(b.value), str))]
            anchor = ("before", stmts[0]) if stmts else None
        if anchor is None or any(isinstance(n, ast.Name) and n.id == rank and isinstance(n.ctx, ast.Store)
                                 and anchor[1].lineno < n.lineno < first for n in ast.walk(scope)):
            continue
        holder = m.parent.get(anchor[1])
        if not all(inside(m, g, holder) for g in group):  # type: ignore[arg-type]
            continue
        taken = scope_names(m, group[0]) | {n.id for n in m.nodes if isinstance(n, ast.Name)}
        name = next(n for n in ("device", "rank_device", "local_device", "cuda_or_cpu") if n not in taken)
        edits.append(Edit(anchor[0], where(anchor[1], m.lines),
                          f'{name} = {torch}.device("cuda", {rank}) if {avail} else {torch}.device("cpu")'))
        names.update({id(g): name for g in group})
    return names


def _rank_assignment(m: ScriptModel, site: ast.AST, rank: str, scope: ast.AST) -> tuple[str, ast.stmt] | None:
    """The nearest `rank = …` statement before `site` in a block that encloses it, within its scope."""
    child: ast.AST | None = statement_of(m, site)
    parent = m.parent.get(child) if child is not None else None
    while child is not None and parent is not None:
        for field in ("body", "orelse", "finalbody"):
            block = getattr(parent, field, None)
            if isinstance(block, list) and child in block:
                for stmt in reversed(block[:block.index(child)]):
                    if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == rank
                                                            for t in stmt.targets):
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
    return Edit("replace", where(site, m.lines), f"{text(m, site.func.value)}.to({name})")


def _site_edit(m: ScriptModel, site: ast.AST, label: str, avail: str, torch: str) -> Edit | None:
    at = where(site, m.lines)
    code = text(m, site)
    if label == "torch.cuda.set_device":
        stmt = statement_of(m, site)
        if isinstance(stmt, ast.Expr) and stmt.value is site:
            return Edit("wrap", where(stmt, m.lines), avail)
        return None
    if label == ".cuda()" and isinstance(site, ast.Call) and isinstance(site.func, ast.Attribute):
        receiver = text(m, site.func.value)
        args = [text(m, a) for a in site.args]
        device = f'{torch}.device("cuda", {args[0]}) if {avail} else "cpu"' if args else f'"cuda" if {avail} else "cpu"'
        rest = [f"{k.arg}={text(m, k.value)}" for k in site.keywords if k.arg]
        return Edit("replace", at, f"{receiver}.to({', '.join([device, *rest])})")
    if label.startswith(".to("):
        return Edit("replace", at, f'{torch}.device("cuda", {code}) if {avail} else "cpu"')
    if label in ("device_ids=", "output_device="):
        return Edit("replace", at, f"{code} if {avail} else None")
    parent = m.parent.get(site)
    wrapped = f'{code} if {avail} else "cpu"' if label.startswith('f"') else f'{code} if {avail} else {torch}.device("cpu")'
    if isinstance(parent, (ast.Attribute, ast.Subscript, ast.BinOp, ast.Compare)):
        wrapped = f"({wrapped})"
    return Edit("replace", at, wrapped)


# -- the world set by the script ------------------------------------------------------------------
def world_set_by_script(m: ScriptModel) -> Hits:
    if call_facts.spawn_targets(m) or any(last_name(c.func) == "Process" for c in m.calls):
        return  # processes started by the script itself: it has to say who is who
    for node, var in _environ_writes(m):
        yield node, _("the script sets {var} itself: under torchrun this overrides the value torchrun gave each "
                      "rank, so the ranks disagree about the job and wait for peers that never come").format(var=var)
    for call in m.calls_to(*INIT):
        method = constant(keyword(call, "init_method"))
        if keyword(call, "store") is not None or (isinstance(method, str) and not method.startswith("env://")):
            continue
        given = [kw for kw in ("world_size", "rank") if keyword(call, kw) is not None
                 and not _from_environment(m, keyword(call, kw))]  # type: ignore[arg-type]
        if given:
            yield call, _("init_process_group gets {arguments} from the script: under torchrun they must be the "
                          "launcher's (WORLD_SIZE/RANK), or the ranks wait for each other").format(
                              arguments=_(" and ").join(f"{k}=" for k in given))


def _environ_writes(m: ScriptModel) -> Iterator[tuple[ast.stmt, str]]:
    """`os.environ["WORLD_SIZE"] = "3"`: a fixed value, not one carried over from SLURM or MPI."""
    for node in m.nodes:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Subscript):
            target = node.targets[0]
            var = constant(target.slice)
            if var in WORLD_VARS and m.resolve(target.value) == "os.environ" and _fixed(node.value):
                yield node, var


def _fixed(value: ast.AST) -> bool:
    if isinstance(value, ast.Call) and last_name(value.func) == "str" and value.args:
        value = value.args[0]
    return isinstance(value, ast.Constant)


def _from_environment(m: ScriptModel, value: ast.AST) -> bool:
    """`int(os.environ["WORLD_SIZE"])`, a name assigned from it (`args.world_size = int(os.environ[…])`
    anywhere in the file: a helper that reads torchrun's variables when they are set), `get_world_size()`."""
    if isinstance(value, ast.Constant):
        return False
    spelled = text(m, value)
    sources = [value] + [n.value for n in m.nodes if isinstance(n, ast.Assign) and len(n.targets) == 1
                         and text(m, n.targets[0]) == spelled]
    return any(constant(n) in WORLD_VARS or (isinstance(n, ast.Attribute) and n.attr in ("environ", "getenv"))
               or (isinstance(n, ast.Call) and last_name(n.func) in ("get_world_size", "get_rank"))
               for source in sources for n in ast.walk(source)) or len(sources) == 1 and not isinstance(
                   value, (ast.Name, ast.Attribute))


def drop_world_setting(node: ast.AST, m: ScriptModel) -> Edits:
    """Remove the assignment (or the two keywords): torchrun's environment says who is who."""
    if isinstance(node, ast.Assign):
        block: list[ast.stmt] = next((getattr(p, f) for p in [m.parent.get(node)] for f in ("body", "orelse", "finalbody")
                      if isinstance(getattr(p, f, None), list) and node in getattr(p, f)), [])
        return [Edit("remove", where(node, m.lines))] if len(block) > 1 else None
    if isinstance(node, ast.Call):
        return [Edit("drop_keyword", where(node, m.lines), name=kw) for kw in ("world_size", "rank")
                if keyword(node, kw) is not None and not _from_environment(m, keyword(node, kw))]  # type: ignore[arg-type]
    return None
