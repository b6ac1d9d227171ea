"""The data side of `mgtutor convert`: the training DataLoader reads this rank's shard.

It gets `sampler=DistributedSampler(dataset, shuffle=<its shuffle>)` and loses `shuffle` (the two
cannot go together). A loader built from `**kwargs` keeps them, less `shuffle`, which moves into the
sampler (`**{**kwargs, "shuffle": False}`, `kwargs.get("shuffle", False)`): nothing the script passes
is lost, and the dict itself is not changed. A data set built inside the DataLoader call is named
first, so the loader and its sampler read the same one.
"""
from __future__ import annotations

import ast

from mgtutor.diagnostics.check.fix.edits import Edit, where
from mgtutor.diagnostics.check.fix.rewrites import scope_names, statement_of, text
from mgtutor.diagnostics.check.match.core import DATALOADER
from mgtutor.diagnostics.check.script_model import ScriptModel, constant, keyword
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
