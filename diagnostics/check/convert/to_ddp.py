"""`mgtutor convert SCRIPT`: a plain one-GPU training script made a DDP script that torchrun runs.

What it writes, on the user's own lines (edits.py, so comments and layout stay):
  - a `ddp_setup()` that joins the process group from torchrun's environment, once: NCCL and this
    rank's GPU where the script runs on CUDA and there are GPUs, gloo on the CPU otherwise; it is
    called where the script chooses its device, on every path, before anything needs the group
    (convert/setup.py);
  - each model wrapped in DDP once it is set up, DataParallel replaced by it, `.module` where the
    script reaches the wrapped model's own attributes or state_dict (convert/model.py);
  - a DistributedSampler for the training DataLoader, its `shuffle` moved into it, also for a loader
    built from `**kwargs` (convert/data.py);
  - the `__main__` block under try: ending with a barrier, the group destroyed in its finally only if
    it was made (a flat script ends with the same);
then the rules' own safe fixes on the result (fix/apply.py): `set_epoch`, rank-0 prints and saves, the
CPU branch of `.cuda()`, and every other print or saved image on rank 0 (a single-GPU script has no
rank guards, so every output of it runs on every rank, callbacks included). What it cannot convert
safely it leaves alone and lists, with the line and why.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field

from mgtutor.diagnostics.check.convert import data as convert_data
from mgtutor.diagnostics.check.convert import model as convert_model
from mgtutor.diagnostics.check.convert import setup as convert_setup
from mgtutor.diagnostics.check.fix.edit_model import Edit, TooDeep, where
from mgtutor.diagnostics.check.fix.edits import apply_edits
from mgtutor.diagnostics.check.fix.apply import fix_source, too_deep
from mgtutor.diagnostics.check import call_facts
from mgtutor.diagnostics.check.fix.rewrites import (
    alone_on_its_statement, module_name, only_statement_of_a_helper, rank_zero_test, statement_of, text,
)
from mgtutor.diagnostics.check.match.core import DATALOADER, DDP, INIT, SPAWN
from mgtutor.diagnostics.check.script_model import (
    DEF_NODES, ScriptModel, has_star_kwargs, identifier_parts, keyword, last_name,
)
from mgtutor.diagnostics.check.script import CheckError, parse
from mgtutor.training.foundation.i18n import N_, _

FOLLOW_UP_RULES = {"sampler-no-set-epoch", "unguarded-print", "unguarded-checkpoint", "cuda-required",
                   "torch-load-no-map-location", "download-every-rank"}
SETUP = '''
def ddp_setup(device=None):
    """Join the process group torchrun describes in the environment, once: NCCL with this rank's GPU
    when the script asks for CUDA (or for no device in particular) and this machine has a GPU for each
    of its ranks, gloo on the CPU otherwise. Returns this rank's device."""
    local_rank = int({os}.environ.get("LOCAL_RANK", "0"))
    ranks_here = int({os}.environ.get("LOCAL_WORLD_SIZE", "1"))
    if not {dist}.is_initialized():
        wants_gpu = device is None or {torch}.device(device).type == "cuda"
        on_gpu = wants_gpu and {torch}.cuda.is_available() and ranks_here <= {torch}.cuda.device_count()
        if on_gpu:
            {torch}.cuda.set_device(local_rank)
        {dist}.init_process_group("nccl" if on_gpu else "gloo", timeout=timedelta(minutes=10))
    if {torch}.cuda.is_available() and {dist}.get_backend() == "nccl":
        return {torch}.device("cuda", local_rank)
    return {torch}.device("cpu")
'''
EVAL_WORDS = {"evaluate", "eval", "validate", "validation", "test"}
OUTPUT_CALLS = {"print", "save_image", "torch.save"}
FOLLOW_UP_WORDS = {"sampler-no-set-epoch": N_("sampler.set_epoch(epoch) at the start of each epoch"),
                   "unguarded-print": N_("a print on rank 0 only"),
                   "unguarded-checkpoint": N_("the checkpoint saved on rank 0 only"),
                   "cuda-required": N_("a CPU branch for the script's CUDA calls"),
                   "torch-load-no-map-location": N_("torch.load onto the CPU (map_location)"),
                   "download-every-rank": N_("the data set downloaded once per machine, the other ranks wait")}


@dataclass
class Conversion:
    file: str
    before: str
    after: str
    not_converted: list[tuple[int, str]] = field(default_factory=list)   # (line, why)
    done: list[str] = field(default_factory=list)                        # what was changed, in words

    def to_json(self) -> dict:
        return {"file": self.file, "changed": self.before != self.after, "done": self.done,
                "not_converted": [{"line": n, "why": why} for n, why in self.not_converted]}


def convert_source(source: str, filename: str = "<script>") -> Conversion:
    """Raises CheckError when the script cannot be read, or is already distributed."""
    m = ScriptModel(parse(source, filename), source, filename)
    if m.calls_to(*INIT) or m.calls_to(*DDP) or m.calls_to(*SPAWN, bare=False):
        raise CheckError(_("{file} already sets up distributed training; `mgtutor check --fix` fixes what it "
                           "can").format(file=filename))
    report = Conversion(filename, source, source)
    edits: list[Edit] = []
    try:
        names = {"os": module_name(m, "os", edits), "torch": module_name(m, "torch", edits),
                 "dist": module_name(m, "torch.distributed", edits)}
        edits.append(Edit("before", where(convert_setup.setup_anchor(m), m.lines), SETUP.format(**names)))
    except LookupError:
        raise CheckError(_("{file}: the names os, torch or dist mean something else in this script; convert "
                           "cannot add the process group").format(file=filename)) from None
    loader = convert_data.training_loader(m)
    stepped = convert_data.stepped_tensor(m) if loader is None else None
    sampler_edits = _samplers(m, loader, report) if stepped is None else _row_shares(m, stepped, names["dist"], report)
    needs_group: list[ast.AST] = [loader] if loader is not None and sampler_edits else [stepped[1].value] if stepped else []
    edits += _setup_calls(m, needs_group, report)
    edits += _models(m, report) + sampler_edits + convert_setup.ending_edits(m, names["dist"])
    edits += _folders_made_by_every_rank(m, report)
    edits += [Edit("import", code=code) for code in (
        "from datetime import timedelta", "from torch.nn.parallel import DistributedDataParallel as DDP",
        "from torch.utils.data.distributed import DistributedSampler")]
    _evaluations(m, report)
    try:
        converted = apply_edits(source, edits)
    except TooDeep:
        raise CheckError(too_deep(filename)) from None
    if converted is None:
        raise CheckError(_("{file}: the conversion could not be placed on this script's layout").format(file=filename))
    report.done.append(_("ddp_setup(): the process group from torchrun's environment (NCCL on GPUs, gloo on CPUs)"))
    report.done.append(_("the script ends with a barrier; the process group is destroyed if it was made"))
    follow = fix_source(converted, filename, unsafe=True, only=FOLLOW_UP_RULES)  # unsafe: the download fix
    report.done += [_("line {line}: {what}").format(line=a.line, what=_(FOLLOW_UP_WORDS[a.rule])) for a in follow.applied]
    report.after, lines = _outputs_on_rank_zero(follow.after, filename)
    report.done += [_("line {line}: output on rank 0 only").format(line=line) for line in lines]
    report.not_converted.sort()
    return report


def _setup_calls(m: ScriptModel, sharded: list[ast.AST], report: Conversion) -> list[Edit]:
    """ddp_setup() where the script sets its device, and before anything at import time that needs it."""
    edits, scope, line = convert_setup.device_edits(m)
    if line is not None:
        report.done.append(_("line {line}: the device is this rank's (ddp_setup())").format(line=line))
    block = convert_setup.main_block(m)
    early = convert_setup.early_users(m, scope, line, sharded)
    if early is not None:
        edits.append(Edit("before", where(early, m.lines), "ddp_setup()"))
        report.done.append(_("line {line}: ddp_setup() before the first line that needs the process group").format(
            line=early.lineno))
    elif line is None:
        first = block.body[0] if block is not None else convert_setup.setup_anchor(m)
        edits.append(Edit("before", where(first, m.lines), "ddp_setup()"))
    if line is None:
        report.not_converted.append((getattr(block, "lineno", 1), _(
            "no device variable found: ddp_setup() is called first, and .cuda() calls get a CPU branch")))
    return edits


def _models(m: ScriptModel, report: Conversion) -> list[Edit]:
    found = convert_setup.device_assignment(m)
    device = (text(m, found[0].targets[0]), found[1], found[0].lineno) if found is not None else None
    wraps = convert_model.models(m, device)
    edits, wrapped, dp_lines = convert_model.data_parallel_edits(m, wraps)
    report.done += [_("line {line}: DataParallel removed (DDP runs one process per GPU)").format(line=n)
                    for n in dp_lines]
    for wrap in wraps:
        if wrap.target not in wrapped:
            moved = f"{wrap.target}.to({wrap.move_to})" if wrap.move_to else wrap.target
            edits.append(Edit("after", where(wrap.anchor, m.lines), f"{wrap.target} = DDP({moved})"))
            report.done.append(_("line {line}: {name} wrapped in DDP once it is set up on its device").format(
                line=wrap.anchor.lineno, name=wrap.target))
        edits += convert_model.module_edits(m, wrap, wrap.anchor.end_lineno or wrap.anchor.lineno)
        edits += convert_model.rewrap_edits(m, wrap)
    if not wraps and not wrapped:
        report.not_converted.append((1, _("no `model = model.to(device)` line found: wrap the model in DDP by hand, "
                                          "after moving it to its device")))
    return edits


def _row_shares(m: ScriptModel, stepped: tuple[str, ast.Assign], dist: str, report: Conversion) -> list[Edit]:
    name, made = stepped
    report.done.append(_("line {line}: each rank takes an equal share of the rows of {name} (no DataLoader: the "
                         "training loop steps through it by index)").format(line=made.lineno, name=name))
    return convert_data.row_share_edits(m, name, made, dist)


def _samplers(m: ScriptModel, training: ast.Call | None, report: Conversion) -> list[Edit]:
    if training is None:
        report.not_converted.append((1, _("no DataLoader: every rank trains on the same data; give each rank its "
                                          "own shard by hand (a DistributedSampler, or slices by rank)")))
        return []
    for call in m.calls_to(*DATALOADER):
        if call is not training:
            report.not_converted.append((call.lineno, _("a second DataLoader (evaluation?) is left whole: every "
                                                        "rank reads all of it; evaluate on rank 0, or shard it too")))
    edits, why = convert_data.sampler_edits(m, training)
    if why is not None:
        report.not_converted.append((training.lineno, why))
    else:
        report.done.append(_("line {line}: the DataLoader reads this rank's shard (DistributedSampler, shuffle "
                             "moved into it)").format(line=training.lineno))
    return edits


def _folders_made_by_every_rank(m: ScriptModel, report: Conversion) -> list[Edit]:
    """`if not os.path.exists(d): os.makedirs(d)`: two ranks both see it missing and the second one's
    makedirs raises FileExistsError; exist_ok=True says what the test meant."""
    edits = []
    for call in m.calls_to("os.makedirs", bare=False):
        if keyword(call, "exist_ok") is None and len(call.args) < 3 and not has_star_kwargs(call):
            edits.append(Edit("keyword", where(call, m.lines), "True", "exist_ok"))
            report.done.append(_("line {line}: the folder may already be there (exist_ok=True): every rank "
                                 "makes it").format(line=call.lineno))
    return edits


def _outputs_on_rank_zero(source: str, filename: str) -> tuple[str, list[int]]:
    """Every print, saved image and checkpoint still on every rank goes under the rank-0 test, in
    helpers and callbacks too: nothing in a one-GPU script was written for several processes."""
    m = ScriptModel(parse(source, filename), source, filename)
    edits: list[Edit] = []
    lines = []
    for call in m.calls:
        name = m.resolve(call.func) or ""
        if not (name in OUTPUT_CALLS or last_name(call.func) == "save_image") or m.rank_guard(call) is not None:
            continue
        fn = m.enclosing(call, DEF_NODES)
        stmt = alone_on_its_statement(m, call)
        if stmt is None or getattr(fn, "name", "") == "ddp_setup" or only_statement_of_a_helper(m, stmt) \
                or call_facts.tagged_output(m, call.args):
            continue  # a helper that only reports: its callers decide; a line tagged with its process: per rank
        try:
            edits.append(Edit("wrap", where(stmt, m.lines), rank_zero_test(m, call, edits)))
        except LookupError:
            continue
        lines.append(call.lineno)
    if not lines:
        return source, []
    try:
        return apply_edits(source, edits) or source, lines
    except TooDeep:
        raise CheckError(too_deep(filename)) from None


def _evaluations(m: ScriptModel, report: Conversion) -> None:
    for call in m.calls:
        name = last_name(call.func) or ""
        if set(identifier_parts(name)) & EVAL_WORDS and name in m.functions and statement_of(m, call) is not None:
            report.not_converted.append((call.lineno, _("{name}() runs on every rank: with DDP each rank evaluates "
                                                        "the whole set; guard it with `if rank == 0:` and call the "
                                                        "model's .module there, or shard the evaluation too").format(
                                                            name=name)))
