"""`mgtutor convert SCRIPT`: a plain one-GPU training script made a DDP script that torchrun runs.

What it writes, on the user's own lines (edits.py, so comments and layout stay):
  - a `ddp_setup()` that joins the process group from torchrun's environment: NCCL and this rank's
    GPU where there are GPUs, gloo on the CPU otherwise; the script's device variable takes its value;
  - the model wrapped in DDP right after it is moved to its device, and `.module.` where the script
    saves or loads the wrapped model's state_dict (the checkpoint stays loadable by the one-GPU script);
  - a DistributedSampler for the training DataLoader, its `shuffle` moved into the sampler;
  - the `__main__` block under try: ending with a barrier, `destroy_process_group()` in its finally;
then the rules' own safe fixes on the result (fix.py): `set_epoch`, rank-0 prints and saves, the
CPU branch of `.cuda()`. What it cannot convert safely it leaves alone and lists, with the line and why.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field

from mgtutor.diagnostics.check.edits import Edit, apply_edits, where
from mgtutor.diagnostics.check.fix import fix_source
from mgtutor.diagnostics.check.fixes import module_name, statement_of, text
from mgtutor.diagnostics.check.match import DATALOADER, DDP, INIT, SPAWN
from mgtutor.diagnostics.check.script_model import (
    DEF_NODES, ScriptModel, constant, has_star_kwargs, identifier_parts, keyword, last_name,
)
from mgtutor.diagnostics.check.script import CheckError, parse
from mgtutor.training.foundation.i18n import N_, _

FOLLOW_UP_RULES = {"sampler-no-set-epoch", "unguarded-print", "unguarded-checkpoint", "cuda-required",
                   "torch-load-no-map-location"}
SETUP = '''
def ddp_setup():
    """Join the process group torchrun describes in the environment: NCCL with one GPU per rank when
    this machine has a GPU for each of its ranks, gloo on the CPU otherwise."""
    local_rank = int({os}.environ.get("LOCAL_RANK", "0"))
    ranks_here = int({os}.environ.get("LOCAL_WORLD_SIZE", "1"))
    if {torch}.cuda.is_available() and ranks_here <= {torch}.cuda.device_count():
        {torch}.cuda.set_device(local_rank)
        {dist}.init_process_group("nccl", timeout=timedelta(minutes=10))
        return {torch}.device("cuda", local_rank)
    {dist}.init_process_group("gloo", timeout=timedelta(minutes=10))
    return {torch}.device("cpu")
'''
EVAL_WORDS = {"evaluate", "eval", "validate", "validation", "test"}
FOLLOW_UP_WORDS = {"sampler-no-set-epoch": N_("sampler.set_epoch(epoch) at the start of each epoch"),
                   "unguarded-print": N_("a print on rank 0 only"),
                   "unguarded-checkpoint": N_("the checkpoint saved on rank 0 only"),
                   "cuda-required": N_("a CPU branch for the script's CUDA calls"),
                   "torch-load-no-map-location": N_("torch.load onto the CPU (map_location)")}


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
    tree = parse(source, filename)
    m = ScriptModel(tree, source, filename)
    if m.calls_to(*INIT) or m.calls_to(*DDP) or m.calls_to(*SPAWN, bare=False):
        raise CheckError(_("{file} already sets up distributed training; `mgtutor check --fix` fixes what it "
                           "can").format(file=filename))
    report = Conversion(filename, source, source)
    edits: list[Edit] = []
    names = {"os": module_name(m, "os", edits), "torch": module_name(m, "torch", edits),
             "dist": module_name(m, "torch.distributed", edits)}
    main_block = _main_block(m)
    first_def = next((n for n in tree.body if isinstance(n, (*DEF_NODES, ast.If)) and n is not None), None)
    if main_block is None or first_def is None:
        raise CheckError(_("{file}: no `if __name__ == \"__main__\":` block to start the process group from; "
                           "convert reads scripts that have one").format(file=filename))
    edits.append(Edit("before", where(first_def, m.lines), SETUP.format(**names)))
    edits += _device(m, main_block, report)
    edits += _wrap_model(m, report)
    edits += _samplers(m, report)
    # every rank leaves together (a barrier), and the group is torn down however the script ends
    edits.append(Edit("try_finally", where(main_block, m.lines), f"{names['dist']}.destroy_process_group()",
                      f"{names['dist']}.barrier()"))
    edits.append(Edit("import", code="from datetime import timedelta"))
    edits.append(Edit("import", code="from torch.nn.parallel import DistributedDataParallel as DDP"))
    edits.append(Edit("import", code="from torch.utils.data.distributed import DistributedSampler"))
    _evaluations(m, report)
    converted = apply_edits(source, edits)
    if converted is None:
        raise CheckError(_("{file}: the conversion could not be placed on this script's layout").format(file=filename))
    report.done.append(_("ddp_setup(): the process group from torchrun's environment (NCCL on GPUs, gloo on CPUs)"))
    report.done.append(_("the __main__ block ends with a barrier; destroy_process_group() in its finally"))
    follow = fix_source(converted, filename, only=FOLLOW_UP_RULES)
    report.after = follow.after
    report.done += [_("line {line}: {what}").format(line=a.line, what=_(FOLLOW_UP_WORDS[a.rule])) for a in follow.applied]
    report.not_converted.sort()
    return report


def _main_block(m: ScriptModel) -> ast.If | None:
    for node in m.tree.body:
        if isinstance(node, ast.If) and "__main__" in ast.dump(node.test):
            return node
    return None


def _device(m: ScriptModel, main_block: ast.If, report: Conversion) -> list[Edit]:
    """The script's one device (`device = 0`, `device = args.device`) becomes this rank's."""
    scopes: list[ast.AST] = [main_block] + [f for f in m.functions.get("main", [])]
    for scope in scopes:
        for node in ast.walk(scope):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                    and set(identifier_parts(node.targets[0].id)) & {"device", "gpu", "dev"}:
                report.done.append(_("line {line}: {name} is this rank's device (ddp_setup())").format(
                    line=node.lineno, name=node.targets[0].id))
                return [Edit("replace", where(node.value, m.lines), "ddp_setup()")]
    report.not_converted.append((main_block.lineno, _("no device variable in the __main__ block: ddp_setup() is "
                                                      "called first there, and .cuda() calls get a CPU branch")))
    return [Edit("before", where(main_block.body[0], m.lines), "ddp_setup()")]


def _wrap_model(m: ScriptModel, report: Conversion) -> list[Edit]:
    for node in m.nodes:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.value, ast.Call) \
                and last_name(node.value.func) in ("to", "cuda") and "model" in text(m, node.targets[0]).lower():
            target = text(m, node.targets[0])
            report.done.append(_("line {line}: {name} wrapped in DDP once it is on its device").format(
                line=node.lineno, name=target))
            edits = [Edit("after", where(node, m.lines), f"{target} = DDP({target})")]
            return edits + _module_prefix(m, node, target)
    report.not_converted.append((1, _("no `model = model.to(device)` line found: wrap the model in DDP by hand, "
                                      "after moving it to its device")))
    return []


def _module_prefix(m: ScriptModel, wrap: ast.Assign, target: str) -> list[Edit]:
    """state_dict()/load_state_dict() of the wrapped model go through `.module`: the checkpoint keeps
    the one-GPU keys (no `module.` prefix), so either script can load it."""
    wrap_fn = m.enclosing(wrap, DEF_NODES)
    edits = []
    for call in m.calls:
        func = call.func
        if isinstance(func, ast.Attribute) and func.attr in ("state_dict", "load_state_dict") \
                and text(m, func.value) == target:
            same_fn = m.enclosing(call, DEF_NODES) is wrap_fn
            if same_fn and call.lineno <= wrap.lineno:
                continue
            edits.append(Edit("replace", where(func, m.lines), f"{target}.module.{func.attr}"))
    return edits


def _samplers(m: ScriptModel, report: Conversion) -> list[Edit]:
    edits: list[Edit] = []
    loaders = m.calls_to(*DATALOADER)
    if not loaders:
        report.not_converted.append((1, _("no DataLoader: every rank trains on the same data; give each rank its "
                                          "own shard by hand (a DistributedSampler, or slices by rank)")))
    training = [c for c in loaders if constant(keyword(c, "shuffle")) is not False] or loaders[:1]
    for call in loaders:
        dataset = call.args[0] if call.args else keyword(call, "dataset")
        if call not in training[:1]:
            report.not_converted.append((call.lineno, _("a second DataLoader (evaluation?) is left whole: every "
                                                        "rank reads all of it; evaluate on rank 0, or shard it too")))
        elif has_star_kwargs(call):
            report.not_converted.append((call.lineno, _("the DataLoader's arguments come from **kwargs (shuffle may "
                                                        "be among them, and it cannot go with a sampler): add "
                                                        "sampler=DistributedSampler(dataset) and drop shuffle by "
                                                        "hand")))
        elif keyword(call, "sampler") is not None or keyword(call, "batch_sampler") is not None:
            report.not_converted.append((call.lineno, _("this DataLoader has its own sampler: make it distributed "
                                                        "by hand")))
        elif not isinstance(dataset, (ast.Name, ast.Attribute)):
            report.not_converted.append((call.lineno, _("the data set is built inside the DataLoader call: give it "
                                                        "a name first, so the sampler and the loader share it")))
        else:
            shuffle = keyword(call, "shuffle")
            arg = f", shuffle={text(m, shuffle)}" if shuffle is not None else ", shuffle=False"
            at = where(call, m.lines)
            if shuffle is not None:
                edits.append(Edit("drop_keyword", at, name="shuffle"))
            edits.append(Edit("keyword", at, f"DistributedSampler({text(m, dataset)}{arg})", "sampler"))
            report.done.append((_("line {line}: the DataLoader reads this rank's shard (DistributedSampler, "
                                  "shuffle moved into it)") if shuffle is not None else
                                _("line {line}: the DataLoader reads this rank's shard (DistributedSampler)")).format(
                                    line=call.lineno))
    return edits


def _evaluations(m: ScriptModel, report: Conversion) -> None:
    for call in m.calls:
        name = last_name(call.func) or ""
        if set(identifier_parts(name)) & EVAL_WORDS and name in m.functions and statement_of(m, call) is not None:
            report.not_converted.append((call.lineno, _("{name}() runs on every rank: with DDP each rank evaluates "
                                                        "the whole set; guard it with `if rank == 0:` and call the "
                                                        "model's .module there, or shard the evaluation too").format(
                                                            name=name)))
