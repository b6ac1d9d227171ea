"""Check rules about what each path through a distributed script does (issue 44):

- `save-guard-all-ranks`: a save under `if not args.multiprocessing_distributed or rank % n == 0`: the
  first half is a flag of the mp.spawn launch, so under torchrun (env://) it is true on every rank.
- `save-per-node`: a checkpoint written when the *local* rank is 0 (`local_rank == 0`, `rank % gpus_per_node
  == 0`): one writer per node, all writing the same path on a shared file system.
- `unseeded-random-split`: `random_split` (or a `randperm` split) without a seeded generator in a
  distributed script: every rank draws its own split, so they train and evaluate on different sets.
- `unwrapped-ddp-branch`: DDP on one branch of a device test (`if torch.cuda.is_available():`) but not on
  the other: on that branch (the CPU one) the ranks train unsynchronised copies.

Same contract as match/core.py: yield (node, message-or-None[, caveat]), nothing when unsure.
"""
from __future__ import annotations

import ast

from mgtutor.diagnostics.check import call_facts
from mgtutor.diagnostics.check.match.core import DDP, FSDP, Hits, distributed, manual_ddp, mentions_distribution, uses_accelerate
from mgtutor.diagnostics.check.match.identity import LOCAL_VARS, _env_var, _multi_node, _names_assigned, _unwrap_int
from mgtutor.diagnostics.check.script_model import DEF_NODES, ScriptModel, constant, identifier_parts, keyword, last_name
from mgtutor.training.foundation.i18n import _

PER_NODE_WORDS = ({"per", "node"}, {"local", "world"}, {"device", "count"}, {"nproc"}, {"ngpus"}, {"gpus"})


def _save_calls(m: ScriptModel) -> list[ast.Call]:
    """torch.save and the calls of a save helper (`save_checkpoint(...)`, `self._save_snapshot(epoch)`)."""
    found = []
    for call in m.calls:
        name = (last_name(call.func) or "").lower()
        if m.resolve(call.func) == "torch.save" or ("save" in name and name not in ("save_state", "savefig")
                                                    and "load" not in name):
            found.append(call)
    return found


def _local_rank_names(m: ScriptModel) -> set[str]:
    def source(value: ast.AST, names: set[str]) -> bool:
        value = _unwrap_int(value)
        return _env_var(value) in LOCAL_VARS or isinstance(value, ast.Name) and value.id in names
    return m.remember("local_rank_names", lambda: _names_assigned(m, source))


def _is_local(m: ScriptModel, node: ast.AST) -> bool:
    if isinstance(node, (ast.Name, ast.Attribute)):
        name = last_name(node)
        parts = identifier_parts(name)
        return ("local" in parts and "rank" in parts) or name in _local_rank_names(m)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):  # rank % ngpus_per_node
        right = node.right
        words = set(identifier_parts((last_name(right.func) if isinstance(right, ast.Call) else last_name(right)) or ""))
        return any(w <= words for w in PER_NODE_WORDS)
    return False


def _zero_tests(test: ast.AST) -> list[ast.Compare]:
    return [n for n in ast.walk(test) if isinstance(n, ast.Compare) and len(n.ops) == 1
            and isinstance(n.ops[0], ast.Eq) and constant(n.comparators[0]) == 0]


def _guards(m: ScriptModel, node: ast.AST) -> list[ast.If]:
    """The `if`s around `node` within its function whose branch holds it (the test itself excluded)."""
    found, child, parent = [], node, m.parent.get(node)
    while parent is not None and not isinstance(parent, DEF_NODES):
        if isinstance(parent, ast.If) and child is not parent.test:
            found.append(parent)
        child, parent = parent, m.parent.get(parent)
    return found


def save_per_node(m: ScriptModel) -> Hits:
    if not distributed(m) or uses_accelerate(m):
        return
    for call in _save_calls(m):
        for guard in _guards(m, call):
            if not m.is_rank_test(guard.test) or _in_orelse(m, call, guard):
                continue
            zeros = _zero_tests(guard.test)
            local = [z for z in zeros if _is_local(m, z.left)]
            global_ = [z for z in zeros if not _is_local(m, z.left) and m.is_rank_test(z.left)]
            if local and not global_:
                message = _("the checkpoint is written where {test} holds: that is one process per node, so on "
                            "several nodes each node's first process writes the same file at once; save on global "
                            "rank 0 (dist.get_rank() == 0)").format(test=ast.unparse(local[0]))
                if _multi_node(m) or isinstance(local[0].left, ast.BinOp):
                    yield call, message
                else:
                    yield call, message, _("nothing in this file says it runs on more than one node; on one node "
                                           "the local rank 0 is rank 0")
            break


def _in_orelse(m: ScriptModel, node: ast.AST, guard: ast.If) -> bool:
    child = node
    while m.parent.get(child) is not guard:
        child = m.parent[child]
    return child in guard.orelse


def save_guard_all_ranks(m: ScriptModel) -> Hits:
    """`if not args.multiprocessing_distributed or …:` where that flag is what starts mp.spawn, and the
    script also runs under a launcher (env://, RANK/WORLD_SIZE read): then the flag is False on every rank."""
    if not distributed(m) or uses_accelerate(m):
        return
    launched = any(s.text in ("env://", "RANK", "WORLD_SIZE") for s in m.strings())
    if not launched:
        return
    spawn_flags = {ast.unparse(n.test) for n in m.nodes if isinstance(n, ast.If)
                   and any(isinstance(c, ast.Call) and last_name(c.func) in ("spawn", "start_processes")
                           for s in n.body for c in ast.walk(s))}
    for call in _save_calls(m):
        for guard in _guards(m, call):
            test = guard.test
            if not (isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or)) or _in_orelse(m, call, guard):
                continue
            for value in test.values:
                if isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.Not) and \
                        ast.unparse(value.operand) in spawn_flags:
                    yield call, _("`{flag}` is true on every rank when the script is launched by torchrun (env://), "
                                  "not mp.spawn: all ranks write this checkpoint").format(flag=ast.unparse(value))
                    break
            break


# -- unseeded-random-split ------------------------------------------------------------------------
def _seeded(m: ScriptModel) -> bool:
    """A seed the same on every rank: manual_seed/seed/set_seed with an argument that does not name a rank."""
    for call in m.calls:
        name = last_name(call.func) or ""
        if name in ("manual_seed", "seed", "set_seed", "seed_everything") and call.args and \
                not any(m.is_rank_test(n) for a in call.args for n in ast.walk(a)
                        if isinstance(n, (ast.Name, ast.Attribute, ast.Call))):
            return True
    return False


def unseeded_random_split(m: ScriptModel) -> Hits:
    if not distributed(m) and not call_facts.spawn_targets(m):
        return
    if _seeded(m):
        return
    for call in m.calls:
        name = last_name(call.func)
        if name == "random_split" and keyword(call, "generator") is None and len(call.args) < 3:
            yield call, _("random_split without a seeded generator: each rank draws its own split, so the ranks "
                          "train and evaluate on different samples (and training data leaks into evaluation)")
    for call in m.calls:
        if last_name(call.func) in ("randperm", "permutation") and keyword(call, "generator") is None \
                and _feeds_subset(m, call):
            yield call, _("a random permutation without a seeded generator picks the split: each rank draws its "
                          "own, so the ranks train and evaluate on different samples")


def _feeds_subset(m: ScriptModel, call: ast.Call) -> bool:
    stmt = m.parent.get(call)
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)):
        return False
    name = stmt.targets[0].id
    scope = m.enclosing(call, DEF_NODES) or m.tree
    return any(isinstance(n, ast.Call) and last_name(n.func) == "Subset" and
               any(isinstance(x, ast.Name) and x.id == name for a in n.args for x in ast.walk(a))
               for n in ast.walk(scope))


# -- unwrapped-ddp-branch -------------------------------------------------------------------------
DEVICE_WORDS = {"cuda", "gpu", "gpus", "accel", "accelerator", "device", "mps", "xpu"}


def _device_test(m: ScriptModel, test: ast.AST) -> bool:
    if mentions_distribution(m, test) or any(last_name(n) == "device_count" for n in ast.walk(test)
                                             if isinstance(n, (ast.Name, ast.Attribute))):
        return False  # "more than one GPU" asks whether to distribute, not where to run
    for node in ast.walk(test):
        if isinstance(node, ast.Constant) and node.value in ("cuda", "cpu"):
            return True
        if isinstance(node, (ast.Name, ast.Attribute)):
            parts = set(identifier_parts(last_name(node) or ""))
            if parts & DEVICE_WORDS or last_name(node) == "is_available":
                return True
    return False


def _wraps(nodes: list[ast.stmt], wrappers: set[int]) -> bool:
    return any(id(n) in wrappers for s in nodes for n in ast.walk(s))


def unwrapped_ddp_branch(m: ScriptModel) -> Hits:
    if not manual_ddp(m):
        return
    wrappers = {id(c) for c in m.calls_to(*DDP, *FSDP)}
    seen: set[int] = set()
    for call in m.calls_to(*DDP):
        for guard in _guards(m, call):
            if id(guard) in seen or not _device_test(m, guard.test):
                continue
            seen.add(id(guard))
            other = guard.body if _in_orelse(m, call, guard) else guard.orelse
            if _wraps(other, wrappers):
                continue
            at = other[0] if other else guard
            yield at, _("the model is wrapped in DDP only when `{test}` is {side}: on the other path (line {line}) "
                        "the ranks train unsynchronised copies").format(
                            test=ast.unparse(guard.test), side=_("false") if _in_orelse(m, call, guard) else _("true"),
                            line=getattr(at, "lineno", guard.lineno))
