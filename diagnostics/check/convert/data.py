"""The data side of `mgtutor convert`: the training DataLoader reads this rank's shard.

It gets `sampler=DistributedSampler(dataset, shuffle=<its shuffle>)` and loses `shuffle` (the two
cannot go together). A loader built from `**kwargs` keeps them, less `shuffle`, which moves into the
sampler (`**{**kwargs, "shuffle": False}`, `kwargs.get("shuffle", False)`): nothing the script passes
is lost, and the dict itself is not changed. A data set built inside the DataLoader call is named
first, so the loader and its sampler read the same one.

A script with no DataLoader that steps through a tensor by row index in its training loop
(`for i in range(0, data.size(0) - 1, bptt)`, PyTorch's word language model) gets each rank an equal
share of that tensor's rows, cut where the tensor is made: equal, so every rank takes as many steps
(one more on one rank would leave the others waiting in its last all-reduce).
"""
from __future__ import annotations

import ast

from mgtutor.diagnostics.check.fix.edit_model import Edit, where
from mgtutor.diagnostics.check.fix.rewrites import scope_names, statement_of, text
from mgtutor.diagnostics.check.match.core import DATALOADER
from mgtutor.diagnostics.check.script_model import ScriptModel, constant, keyword, last_name
from mgtutor.training.foundation.i18n import _

EVAL_PARTS = ("test", "val", "eval", "valid")


def _loader_name(m: ScriptModel, call: ast.Call) -> str:
    owner = m.parent.get(call)
    return text(m, owner.targets[0]).lower() if isinstance(owner, ast.Assign) and len(owner.targets) == 1 else ""


def training_loader(m: ScriptModel) -> ast.Call | None:
    """The loader the model trains on: one named for training, else the first that is not named for
    evaluation and does not turn shuffling off."""
    loaders = m.calls_to(*DATALOADER)
    named = [c for c in loaders if "train" in _loader_name(m, c)]
    if named:
        return named[0]
    rest = [c for c in loaders if not any(p in _loader_name(m, c) for p in EVAL_PARTS)]
    shuffling = [c for c in rest if constant(keyword(c, "shuffle")) is not False]
    chosen = shuffling or rest or loaders
    return chosen[0] if chosen else None


def stepped_tensor(m: ScriptModel) -> tuple[str, ast.Assign] | None:
    """The tensor a training loop (one that calls backward) steps through by row index, and the
    assignment that makes it (at module level, or in the loop's function): None when there is none."""
    for loop in (node for node in ast.walk(m.tree) if isinstance(node, ast.For)):
        steps = loop.iter
        if isinstance(steps, ast.Call) and _called(steps, "enumerate") and steps.args:
            steps = steps.args[0]
        if not _called(steps, "range") or not any(_called(n, "backward") for n in ast.walk(loop)):
            continue
        for name in filter(None, map(_rows_of, ast.walk(steps))):
            made = _made_at(m, loop, name)
            if made is not None:
                return name, made
    return None


def _called(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Call) and last_name(node.func) == name


def _rows_of(node: ast.AST) -> str | None:
    """`x` of `x.size(0)`, `x.shape[0]` or `len(x)`."""
    if isinstance(node, ast.Call) and _called(node, "len") and len(node.args) == 1 and isinstance(node.args[0], ast.Name):
        return node.args[0].id
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "size" and \
            constant(node.args[0] if node.args else None) == 0 and isinstance(node.func.value, ast.Name):
        return node.func.value.id
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "shape" and \
            constant(node.slice) == 0 and isinstance(node.value.value, ast.Name):
        return node.value.value.id
    return None


def _made_at(m: ScriptModel, loop: ast.For, name: str) -> ast.Assign | None:
    """Where `name` is made before the loop: in the loop's function, else at module level (any line, when
    the loop is in a function that runs later)."""
    function = m.enclosing(loop, (ast.FunctionDef, ast.AsyncFunctionDef))
    inside = function.body if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)) else []
    made = [s for s in _assignments(inside, name) if s.lineno < loop.lineno]
    made = made or [s for s in _assignments(m.tree.body, name) if function is not None or s.lineno < loop.lineno]
    return made[-1] if made else None


def _assignments(body: list[ast.stmt], name: str) -> list[ast.Assign]:
    return [s for s in body if isinstance(s, ast.Assign) and len(s.targets) == 1 and
            isinstance(s.targets[0], ast.Name) and s.targets[0].id == name]


def row_share_edits(m: ScriptModel, name: str, made: ast.Assign, dist: str) -> list[Edit]:
    share = next(n for n in ("rows_per_rank", "rows_of_each_rank", "rank_rows") if n not in scope_names(m, made))
    return [Edit("after", where(made, m.lines),
                 f"{share} = len({name}) // {dist}.get_world_size()  # the same for every rank: as many steps each\n"
                 f"{name} = {name}[{dist}.get_rank() * {share}:({dist}.get_rank() + 1) * {share}]")]


def _star_kwargs(call: ast.Call) -> list[ast.keyword]:
    return [kw for kw in call.keywords if kw.arg is None]


def sampler_edits(m: ScriptModel, call: ast.Call) -> tuple[list[Edit], str | None]:
    """The edits that give the loader its DistributedSampler, or ([], why not) in words."""
    if keyword(call, "sampler") is not None or keyword(call, "batch_sampler") is not None:
        return [], _("this DataLoader has its own sampler: make it distributed by hand")
    stars = _star_kwargs(call)
    if any(isinstance(a, ast.Starred) for a in call.args) or len(stars) > 1 or \
            stars and not isinstance(stars[0].value, (ast.Name, ast.Attribute)):
        return [], _("the DataLoader's arguments come from *args or several **kwargs: add "
                     "sampler=DistributedSampler(dataset) and drop shuffle by hand")
    edits: list[Edit] = []
    dataset = call.args[0] if call.args else keyword(call, "dataset")
    if dataset is None:
        return [], _("no data set found in this DataLoader call: add sampler=DistributedSampler(dataset) by hand")
    name = text(m, dataset)
    if not isinstance(dataset, (ast.Name, ast.Attribute)):
        stmt = statement_of(m, call)
        if not isinstance(stmt, (ast.Assign, ast.Expr, ast.Return)):
            return [], _("the data set is built inside the DataLoader call: give it a name first, so the "
                         "sampler and the loader share it")
        name = next(n for n in ("train_set", "train_dataset", "dataset_to_shard") if n not in scope_names(m, call))
        edits += [Edit("before", where(stmt, m.lines), f"{name} = {text(m, dataset)}"),
                  Edit("replace", where(dataset, m.lines), name)]
    at = where(call, m.lines)
    shuffle = keyword(call, "shuffle")
    if shuffle is not None:
        edits.append(Edit("drop_keyword", at, name="shuffle"))
        chosen = text(m, shuffle)
    elif stars:
        kwargs = text(m, stars[0].value)
        edits.append(Edit("replace", where(stars[0].value, m.lines), f'{{**{kwargs}, "shuffle": False}}'))
        chosen = f'{kwargs}.get("shuffle", False)'
    else:
        chosen = "False"
    edits.append(Edit("keyword", at, f"DistributedSampler({name}, shuffle={chosen})", "sampler"))
    return edits, None
