"""Check rules about who does what: rank-0-only output and checkpoints, collectives that only some
ranks reach. Same contract as check_match.py: yield (node, message-or-None), nothing when unsure."""
from __future__ import annotations

import ast

from mgtutor.diagnostics.check import follow
from mgtutor.diagnostics.check.match import (
    COLLECTIVES, Hits, distributed, in_single_process_branch, manual_ddp, mentions_rank,
)
from mgtutor.diagnostics.check.model import DEF_NODES, ScriptModel, dotted, keyword, last_name


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
        if m.runs_on_all_ranks(call) is True and not mentions_rank(m, target) and not follow.per_rank_path(m, target):
            yield call, None


def unguarded_print(m: ScriptModel) -> Hits:
    """Prints every rank runs — not those of the launching process before mp.spawn, not those tagged
    with the pid, and nothing when `print` is replaced to silence other ranks (DINO's, MAE's and
    DeiT's `setup_for_distributed`)."""
    if not manual_ddp(m) or follow.print_replaced(m):
        return
    rank_logging = any(mentions_rank(m, [c]) for c in m.method_calls("setLevel") + m.method_calls("basicConfig"))
    outputs = m.calls_to("print") + ([] if rank_logging else [
        c for c in m.calls if m.resolve(c.func) in {f"logging.{n}" for n in ("info", "warning", "debug", "error")}])
    unguarded = [c for c in outputs if m.runs_on_all_ranks(c) is True and not mentions_rank(m, c.args)
                 and not _called_with_rank(m, c) and not follow.in_spawn_parent(m, c)
                 and not follow.tagged_output(m, c.args) and not in_single_process_branch(m, c)]
    if not unguarded:
        return
    first = min(unguarded, key=lambda c: c.lineno)
    more = f" (and {len(unguarded) - 1} more)" if len(unguarded) > 1 else ""
    message = f"print/logging runs on every rank{more}: each line appears once per GPU"
    unread = follow.unread_setup_calls(m)
    if unread:
        yield first, message, (f"the distributed setup happens in {follow.describe_call(m, unread[0])}, which was not "
                               "read; projects often silence print on every rank but 0 there")
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
        if any(m.rank_guard(o) is not None and _branch(m, o, m.rank_guard(o)) != _branch(m, call, guard)
               for o in same):
            continue  # "rank 0 first, then the others" on purpose: both sides meet at a barrier
        yield call, f"{last_name(call.func)}() runs only on the ranks that pass line {guard.lineno}: " \
                    "the other ranks never join it, so the job hangs"


def _branch(m: ScriptModel, node: ast.AST, guard: ast.AST) -> tuple[int, str]:
    child = node
    while m.parent.get(child) is not None and m.parent[child] is not guard:
        child = m.parent[child]
    if m.parent.get(child) is guard:
        return guard.lineno, "orelse" if child in getattr(guard, "orelse", []) else "body"
    return guard.lineno, "after"
