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
from mgtutor.diagnostics.check.fix.edit_model import Edit, where
from mgtutor.diagnostics.check.fix.rewrites import Edits, statement_of, text
from mgtutor.diagnostics.check.match.core import DDP, INIT, Hits, _under_cuda_test, manual_ddp
from mgtutor.diagnostics.check.script_model import DEF_NODES, ScriptModel, constant, dotted, keyword, last_name
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
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format" \
                and str(constant(node.func.value, "")).startswith("cuda:"):
            sites.append((node, '"cuda:{}".format(…)'))
    sites = [(n, label) for n, label in sites if not _guarded(m, n) and not _handed_to_a_chooser(m, n)]
    sites += [(n, "device_count()") for n in _counts_of_gpus(m)]
    return sorted(sites, key=lambda s: (s[0].lineno, s[0].col_offset))  # type: ignore[attr-defined]


DEVICE_COUNT = ("torch.cuda.device_count", "torch.accelerator.device_count")


def _counts_of_gpus(m: ScriptModel) -> list[ast.Call]:
    """device_count() used as a number of processes or a divisor: 0 on a machine without a GPU, so
    `mp.spawn(nprocs=…)` starts nobody and `batch / n` divides by zero (not a test `n > 1`)."""
    found = []
    for call in m.calls:
        if m.resolve(call.func) not in DEVICE_COUNT:
            continue
        parent = m.parent.get(call)
        divides = isinstance(parent, ast.BinOp) and parent.right is call and \
            isinstance(parent.op, (ast.Div, ast.FloorDiv, ast.Mod))
        spawned = isinstance(parent, ast.keyword) and parent.arg == "nprocs"
        if (divides or spawned or isinstance(parent, ast.Assign) and parent.value is call and _used_as_count(m, parent)) \
                and not _in_cuda_branch(m, call):
            found.append(call)
    return found


def _in_cuda_branch(m: ScriptModel, node: ast.AST) -> bool:
    """`if device.type == "cuda": n = torch.accelerator.device_count()`: a CPU run never gets there."""
    current = m.parent.get(node)
    while current is not None and not isinstance(current, DEF_NODES):
        if isinstance(current, (ast.If, ast.IfExp, ast.While)) and _mentions_cuda(current.test):
            return True
        current = m.parent.get(current)
    return _under_cuda_test(m, node)


def _used_as_count(m: ScriptModel, assign: ast.Assign) -> bool:
    """The name a count is stored in is used for more than comparing (`if n > 1:`)."""
    def loads() -> dict[str, list[ast.AST]]:
        found: dict[str, list[ast.AST]] = {}
        for n in m.nodes:
            if isinstance(n, (ast.Name, ast.Attribute)) and isinstance(n.ctx, ast.Load) and dotted(n):
                found.setdefault(dotted(n), []).append(n)  # type: ignore[arg-type]
        return found
    uses = [u for t in assign.targets for u in m.remember("loads_by_name", loads).get(dotted(t) or "", [])]
    return any(not isinstance(m.parent.get(u), ast.Compare) for u in uses)


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
    def assigned() -> dict[str, list[ast.AST]]:
        values: dict[str, list[ast.AST]] = {}
        for n in m.nodes:
            if isinstance(n, ast.Assign) and len(n.targets) == 1:
                values.setdefault(text(m, n.targets[0]), []).append(n.value)
        return values
    sources = [value, *m.remember("assigned_by_text", assigned).get(text(m, value), [])]
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
