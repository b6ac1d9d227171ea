"""Check rules about who does what: rank-0-only output and checkpoints, collectives that only some
ranks reach. Same contract as match/core.py: yield (node, message-or-None), nothing when unsure."""
from __future__ import annotations

import ast

from mgtutor.diagnostics.check import call_facts
from mgtutor.diagnostics.check.fix import rewrites as fixes
from mgtutor.diagnostics.check.match.core import (
    COLLECTIVES, Hits, distributed, in_single_process_branch, manual_ddp, mentions_rank,
)
from mgtutor.diagnostics.check.script_model import DEF_NODES, EXIT_CALLS, GuardNode, ScriptModel, dotted, keyword, last_name
from mgtutor.training.foundation.i18n import _


def unguarded_checkpoint(m: ScriptModel) -> Hits:
    if not distributed(m):
        return
    saves = m.calls_to("torch.save", bare=False) + \
        [c for c in m.method_calls("save_pretrained") if keyword(c, "is_main_process") is None]
    for call in sorted(saves, key=lambda c: c.lineno):
        target = call.args[1:2] if last_name(call.func) == "save" else call.args[:1]
        target += [kw.value for kw in call.keywords if kw.arg in ("f", "save_directory")]
        if any("buf" in (dotted(t) or "").lower() or "BytesIO" in (dotted(getattr(t, "func", t)) or "")
               for t in target):
            continue
        if m.runs_on_all_ranks(call) is True and not mentions_rank(m, target) and not call_facts.per_rank_path(m, target) \
                and not per_process_path(m, target):
            yield call, None


PER_PROCESS = {"getpid", "uuid1", "uuid4", "mkstemp", "mkdtemp", "NamedTemporaryFile", "TemporaryDirectory",
               "gethostname", "token_hex"}


def per_process_path(m: ScriptModel, exprs: list[ast.expr]) -> bool:
    """`f"ckpt_{os.getpid()}.pt"`, a uuid or a temporary file (here or in the name's last assignment):
    each process writes its own file, so every rank saving is the point (issue 46, item 7)."""
    def unique(node: ast.AST | None) -> bool:
        return node is not None and any(isinstance(n, ast.Call) and last_name(n.func) in PER_PROCESS
                                        for n in ast.walk(node))
    return any(unique(e) or any(isinstance(n, ast.Name) and unique(call_facts.assigned_before(m, n)) for n in ast.walk(e))
               for e in exprs)


def unguarded_outputs(m: ScriptModel) -> list[ast.Call]:
    if not manual_ddp(m) or call_facts.print_replaced(m):
        return []
    rank_logging = any(mentions_rank(m, [c]) for c in m.method_calls("setLevel") + m.method_calls("basicConfig"))
    outputs = m.calls_to("print") + ([] if rank_logging else [
        c for c in m.calls if m.resolve(c.func) in {f"logging.{n}" for n in ("info", "warning", "debug", "error")}])
    return [c for c in outputs if m.runs_on_all_ranks(c) is True and not mentions_rank(m, c.args)
            and not _called_with_rank(m, c) and not call_facts.in_spawn_parent(m, c)
            and not call_facts.tagged_output(m, c.args) and not in_single_process_branch(m, c)
            and not _says_why_it_exits(m, c)]


def _says_why_it_exits(m: ScriptModel, call: ast.Call) -> bool:
    """`print("not enough GPUs, exiting"); sys.exit()`: each process explains why it stops; once per
    rank is what it should be."""
    stmt = m.parent.get(call)
    parent = m.parent.get(stmt) if isinstance(stmt, ast.Expr) else None
    for field in ("body", "orelse", "finalbody", "handlers"):
        block = getattr(parent, field, None)
        if isinstance(block, list) and stmt in block:
            rest = block[block.index(stmt) + 1:]
            return bool(rest) and (isinstance(rest[0], ast.Raise) or isinstance(rest[0], ast.Expr)
                                   and isinstance(rest[0].value, ast.Call)
                                   and dotted(rest[0].value.func) in EXIT_CALLS)
    return False


def rank_zero_prints(node: ast.AST, m: ScriptModel) -> fixes.Edits:
    """Every print the rule counted, each under `if rank == 0:` (not a helper's only line: its callers
    decide who reports)."""
    edits = [e for call in unguarded_outputs(m) for e in (fixes.rank_zero_only(call, m) or [])]
    return edits or None


def unguarded_print(m: ScriptModel) -> Hits:
    """Prints every rank runs — not those of the launching process before mp.spawn, not those tagged
    with the pid, and nothing when `print` is replaced to silence other ranks (DINO's, MAE's and
    DeiT's `setup_for_distributed`)."""
    unguarded = unguarded_outputs(m)
    if not unguarded:
        return
    first = min(unguarded, key=lambda c: c.lineno)
    more = _(" (and {count} more)").format(count=len(unguarded) - 1) if len(unguarded) > 1 else ""
    message = _("print/logging runs on every rank{more}: each line appears once per GPU").format(more=more)
    unread = call_facts.unread_setup_calls(m)
    if unread:
        yield first, message, _("the distributed setup happens in {call}, which was not read; projects often "
                                "silence print on every rank but 0 there").format(call=call_facts.describe_call(m, unread[0]))
    else:
        yield first, message


def _called_with_rank(m: ScriptModel, node: ast.AST) -> bool:
    """`def report(**f): print(f)` called as `report(rank=rank, …)`: the output names its rank."""
    fn = m.enclosing(node, DEF_NODES)
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    calls = [c for c in m.calls if last_name(c.func) == fn.name]
    return bool(calls) and all(mentions_rank(m, [*c.args, *(k.value for k in c.keywords)]) for c in calls)


def unguarded_tracker(m: ScriptModel) -> Hits:
    if not distributed(m):
        return
    trackers = m.calls_to("torch.utils.tensorboard.SummaryWriter", "tensorboardX.SummaryWriter",
                          "torch.utils.tensorboard.writer.SummaryWriter") + \
        m.calls_to("wandb.init", "mlflow.start_run", bare=False)
    for call in trackers:
        if m.runs_on_all_ranks(call) is True:
            yield call, None


def collective_in_rank_branch(m: ScriptModel) -> Hits:
    calls = [c for c in m.calls if (m.resolve(c.func) or "").startswith("torch.distributed.")
             and last_name(c.func) in COLLECTIVES and keyword(c, "group") is None]
    calls += [c for c in m.method_calls("wait_for_everyone")]
    for call in calls:
        guard = m.rank_guard(call)
        if guard is None:
            continue
        same = [o for o in m.calls if o is not call and last_name(o.func) == last_name(call.func)]
        guarded = [(o, g) for o in same for g in [m.rank_guard(o)] if g is not None]
        if any(_branch(m, o, g) != _branch(m, call, guard) for o, g in guarded):
            continue  # "rank 0 first, then the others" on purpose: both sides meet at a barrier
        message = _("{name}() runs only on the ranks that pass line {line}: the other ranks never join it, "
                    "so the job hangs").format(name=last_name(call.func), line=guard.lineno)
        condition = _other_condition(m, call, guard)
        if condition is None:
            yield call, message
        elif not _under_same_condition(m, call, condition):
            yield call, message, _("the ranks leave at line {line} only when {condition} also holds; if it never "
                                   "does when this collective runs, every rank joins it").format(
                                       line=guard.lineno, condition=condition)


def _other_condition(m: ScriptModel, call: ast.AST, guard: GuardNode) -> str | None:
    """`if not fsdp_eval and not is_rank0: return` — an early exit that also needs a condition
    unrelated to the rank: the names in that condition, or None for a plain rank guard."""
    if not isinstance(guard, ast.If) or fixes.inside(m, call, guard) or not isinstance(guard.test, ast.BoolOp) \
            or not isinstance(guard.test.op, ast.And):
        return None
    others = [v for v in guard.test.values if not m.is_rank_test(v)]
    names = sorted({n.id for v in others for n in ast.walk(v) if isinstance(n, ast.Name)})
    return " and ".join(names) if others and names else None


def _under_same_condition(m: ScriptModel, call: ast.AST, condition: str) -> bool:
    """The collective itself sits under an `if` on the same names (`if fsdp_eval: … broadcast`):
    exactly the case in which the early exit is not taken."""
    wanted = set(condition.split(" and "))
    current = m.parent.get(call)
    while current is not None and not isinstance(current, DEF_NODES):
        if isinstance(current, (ast.If, ast.While)) and wanted & {n.id for n in ast.walk(current.test)
                                                                   if isinstance(n, ast.Name)}:
            return True
        current = m.parent.get(current)
    return False


def _branch(m: ScriptModel, node: ast.AST, guard: GuardNode) -> tuple[int, str]:
    child = node
    while m.parent.get(child) is not None and m.parent[child] is not guard:
        child = m.parent[child]
    if m.parent.get(child) is guard:
        return guard.lineno, "orelse" if child in getattr(guard, "orelse", []) else "body"
    return guard.lineno, "after"
