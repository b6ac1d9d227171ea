"""The rewrite for `unguarded-checkpoint`: the save on rank 0, written as the rule's advice says.

- What is saved is the user's model: `model.state_dict()` of a DDP wrapper becomes
  `model.module.state_dict()` (keys without "module."), in the save call or in the name it saves
  (`ckp = model.state_dict(); torch.save(ckp, p)`), unless the file loads a state dict back into the
  wrapper (then it expects the prefix).
- `with open(p, "wb") as f: torch.save(x, f)`: the whole `with` goes under the guard; otherwise every
  other rank would still open, and so empty, the file rank 0 writes.
- When the file also loads checkpoints, a barrier follows, so no rank reads the file before rank 0 has
  written it. Every rank must reach that barrier: it goes after the enclosing `if`s whose test can
  differ between ranks (a rank test, or a value that changes while training, `val_loss < best`), never
  inside them.
"""
from __future__ import annotations

import ast

from mgtutor.diagnostics.check import call_facts
from mgtutor.diagnostics.check.fix.edit_model import Edit, where
from mgtutor.diagnostics.check.fix.rewrites import (
    Edits, alone_on_its_statement, module_name, only_statement_of_a_helper, rank_zero_test,
)
from mgtutor.diagnostics.check.script_model import DEF_NODES, LOOP_NODES, ScriptModel, dotted, last_name

SHARED_ROOTS = {"args", "opt", "opts", "config", "cfg", "conf", "hparams", "flags", "FLAGS", "params"}


def rank_zero_save(node: ast.AST, m: ScriptModel) -> Edits:
    stmt = alone_on_its_statement(m, node)
    if stmt is None or not isinstance(node, ast.Call) or only_statement_of_a_helper(m, stmt):
        return None
    guarded = _written_in(m, stmt, node) or stmt
    edits: list[Edit] = []
    try:
        test = rank_zero_test(m, node, edits)
    except LookupError:
        return None
    edits += [Edit("wrap", where(guarded, m.lines), test), *_unwrapped_state_dicts(m, node)]
    if not m.calls_to("torch.load", bare=False):
        return edits
    try:
        dist = module_name(m, "torch.distributed", edits)
    except LookupError:
        return edits
    return [*edits, Edit("after", where(_every_rank_place(m, guarded), m.lines),
                         f"if {dist}.is_initialized():\n    {dist}.barrier()")]


def _written_in(m: ScriptModel, stmt: ast.stmt, save: ast.Call) -> ast.With | None:
    """The `with open(path, "wb") as f:` whose file the save writes, when the save is its only work."""
    holder = m.parent.get(stmt)
    if not isinstance(holder, ast.With) or len(holder.items) != 1 or len(holder.body) != 1:
        return None
    item = holder.items[0]
    opened = item.context_expr
    if not (isinstance(opened, ast.Call) and last_name(opened.func) == "open" and isinstance(item.optional_vars, ast.Name)):
        return None
    written = save.args[1] if len(save.args) > 1 else None
    return holder if isinstance(written, ast.Name) and written.id == item.optional_vars.id else None


def _every_rank_place(m: ScriptModel, stmt: ast.stmt) -> ast.stmt:
    """The statement after which every rank that reached `stmt`'s loop or function arrives."""
    place = stmt
    parent = m.parent.get(place)
    while isinstance(parent, (ast.If, ast.With, ast.Try)) and not isinstance(parent, DEF_NODES):
        if isinstance(parent, ast.If) and same_on_every_rank(m, parent.test):
            break
        place, parent = parent, m.parent.get(parent)
    return place


def same_on_every_rank(m: ScriptModel, test: ast.AST) -> bool:
    """A test every rank answers alike: loop counters, the script's options, values set once. Not a
    rank test, and not a value assigned inside a loop (a loss, an accuracy, a best score)."""
    if m.is_rank_test(test):
        return False
    counters = {n.target.id for n in _enclosing_loops(m, test)
                if isinstance(n, (ast.For, ast.AsyncFor)) and isinstance(n.target, ast.Name)}
    changing = _assigned_in_loops(m)
    for n in ast.walk(test):
        if isinstance(n, ast.Call) and last_name(n.func) not in ("len", "int", "float", "str", "bool", "getattr",
                                                                   "hasattr", "isinstance", "exists", "isfile"):
            return False
        if isinstance(n, (ast.Name, ast.Attribute)) and isinstance(getattr(n, "ctx", None), ast.Load):
            spelled = dotted(n) or ""
            root = spelled.split(".")[0]
            if root in counters or root in SHARED_ROOTS and spelled not in changing:
                continue
            if spelled in changing or (isinstance(n, ast.Name) and n.id in changing):
                return False
    return True


def _enclosing_loops(m: ScriptModel, node: ast.AST) -> list[ast.AST]:
    loops: list[ast.AST] = []
    current = m.parent.get(node)
    while current is not None and not isinstance(current, DEF_NODES):
        if isinstance(current, LOOP_NODES):
            loops.append(current)
        current = m.parent.get(current)
    return loops


def _assigned_in_loops(m: ScriptModel) -> set[str]:
    def compute() -> set[str]:
        names: set[str] = set()
        for loop in (n for n in m.nodes if isinstance(n, LOOP_NODES)):
            for inner in ast.walk(loop):
                targets = inner.targets if isinstance(inner, ast.Assign) else \
                    [inner.target] if isinstance(inner, (ast.AugAssign, ast.AnnAssign)) else []
                names |= {name for t in targets for name in [dotted(t)] if name}
        return names
    return m.remember("assigned_in_loops", compute)


def _unwrapped_state_dicts(m: ScriptModel, save: ast.Call) -> list[Edit]:
    wrappers = {dotted(t) for n in m.nodes if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call)
                and (m.resolve(n.value.func) or "").endswith("DistributedDataParallel") for t in n.targets}
    wrappers.discard(None)
    loads_back = {dotted(c.func.value) for c in m.method_calls("load_state_dict") if isinstance(c.func, ast.Attribute)}
    saved: list[ast.AST] = [save]
    saved += [v for a in save.args[:1] if isinstance(a, ast.Name) for v in [call_facts.assigned_before(m, a)] if v]
    edits = []
    for n in (n for root in saved for n in ast.walk(root)):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "state_dict" \
                and not n.args and dotted(n.func.value) in wrappers and dotted(n.func.value) not in loads_back:
            edits.append(Edit("replace", where(n, m.lines), f"{dotted(n.func.value)}.module.state_dict()"))
    return edits
