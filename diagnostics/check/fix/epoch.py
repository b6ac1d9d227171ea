"""The rewrite for `sampler-no-set-epoch`: `sampler.set_epoch(epoch)` where the epoch starts, with the
sampler spelled as the code at that place can reach it (its name, or `loader.sampler`)."""
from __future__ import annotations

import ast

from mgtutor.diagnostics.check.fix.edit_model import Edit, where
from mgtutor.diagnostics.check.fix.rewrites import Edits, scope_names, statement_of, text
from mgtutor.diagnostics.check.script_model import DEF_NODES, ScriptModel, last_name


def set_epoch(node: ast.AST, m: ScriptModel) -> Edits:
    """`sampler.set_epoch(epoch)` first thing in the epoch loop (or before the loop over the loader,
    when the epoch is a parameter of the function that runs one epoch)."""
    sampler, loader = _sampler_and_loader(m, node)
    for loop in _loops_over(m, [r for r in (loader, sampler) if r]):
        epoch_loop = _enclosing_epoch_loop(m, loop)
        fn = m.enclosing(loop, DEF_NODES)
        iterated = text(m, _iterated(loop))
        if epoch_loop is not None and isinstance(epoch_loop.target, ast.Name):
            ref = _reachable(m, epoch_loop, sampler) or (f"{iterated}.sampler" if loader and iterated == loader
                                                         else None)
            if ref:
                first = epoch_loop.body[0]
                return [Edit("before", where(first, m.lines), f"{ref}.set_epoch({epoch_loop.target.id})")]
        params = [a.arg for a in fn.args.args] if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) else []
        epoch = next((p for p in params if "epoch" in p.lower()), None)
        stmt = statement_of(m, loop)
        if epoch and stmt is not None:
            ref = _reachable(m, loop, sampler) or (f"{iterated}.sampler" if loader else None)
            if ref:
                return [Edit("before", where(stmt, m.lines), f"{ref}.set_epoch({epoch})")]
    return None


def _sampler_and_loader(m: ScriptModel, node: ast.AST) -> tuple[str | None, str | None]:
    parent = m.parent.get(node)
    if isinstance(parent, ast.Assign) and len(parent.targets) == 1:
        sampler = text(m, parent.targets[0])
        for call in m.calls:
            if any(text(m, kw.value) == sampler for kw in call.keywords if kw.arg == "sampler"):
                owner = m.parent.get(call)
                loader = text(m, owner.targets[0]) if isinstance(owner, ast.Assign) and len(owner.targets) == 1 \
                    else None
                return sampler, loader
        return sampler, None
    if isinstance(parent, ast.keyword) and parent.arg == "sampler":
        loader_call = m.parent.get(parent)
        owner = m.parent.get(loader_call) if loader_call is not None else None
        if isinstance(owner, ast.Assign) and len(owner.targets) == 1:
            return None, text(m, owner.targets[0])
        if isinstance(owner, ast.Return):  # `return DataLoader(...)`: the loader is whatever the caller named it
            fn = m.enclosing(owner, DEF_NODES)
            for call in m.calls:
                target = m.parent.get(call)
                if last_name(call.func) == getattr(fn, "name", None) and isinstance(target, ast.Assign):
                    return None, text(m, target.targets[0])
    return None, None


def _loops_over(m: ScriptModel, refs: list[str]) -> list[ast.For | ast.comprehension]:
    """For loops that iterate one of these (directly, or through enumerate/tqdm), or an attribute
    that was assigned from one (`self.train_data = train_data`)."""
    names = set(refs)
    for n in m.nodes:
        if isinstance(n, ast.Assign) and len(n.targets) == 1 and text(m, n.value) in names:
            names.add(text(m, n.targets[0]))
    for n in m.nodes:  # a parameter the loader is passed to: Trainer(model, train_data, …)
        if isinstance(n, ast.Call):
            for fn in m.functions.get(last_name(n.func) or "", []) + [
                    f for c in m.classes.get(last_name(n.func) or "", []) for f in c.body
                    if isinstance(f, ast.FunctionDef) and f.name == "__init__"]:
                params = [a.arg for a in fn.args.args if a.arg != "self"]
                for param, arg in zip(params, n.args):
                    if text(m, arg) in names:
                        names.add(param)
                        for s in ast.walk(fn):
                            if isinstance(s, ast.Assign) and text(m, s.value) == param and len(s.targets) == 1:
                                names.add(text(m, s.targets[0]))
    loops = []
    for n in m.nodes:
        if isinstance(n, (ast.For, ast.comprehension)):  # `for x in loader:`, `[f(b) for b in loader]`
            if text(m, _iterated(n)) in names or text(m, n.iter) in names:
                loops.append(n)
    return sorted(loops, key=lambda n: n.iter.lineno)


def _iterated(loop: ast.For | ast.comprehension) -> ast.AST:
    """What a loop reads batches from: `loader` in `enumerate(loader)`, `tqdm(loader, …)`, `loader`."""
    return loop.iter.args[0] if isinstance(loop.iter, ast.Call) and loop.iter.args else loop.iter


def _enclosing_epoch_loop(m: ScriptModel, loop: ast.AST) -> ast.For | None:
    current = m.parent.get(loop)
    while current is not None and not isinstance(current, DEF_NODES):
        if isinstance(current, ast.For) and isinstance(current.target, ast.Name) and \
                "epoch" in current.target.id.lower():
            return current
        current = m.parent.get(current)
    return None


def _reachable(m: ScriptModel, place: ast.AST, name: str | None) -> str | None:
    """`name` when the code at `place` can see it: the same function, or module level."""
    return name if name and name in scope_names(m, place) | scope_names(m, m.tree) else None
