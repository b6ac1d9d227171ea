""""Default process group has not been initialized" in a run that mgtutor itself started under torchrun.

The catalogue's advice ("launch with torchrun or `mgtutor run`") is for a script run with plain python;
here torchrun did start every rank, so the script skipped its own init_process_group. The finding points at
the `if` around that call (read statically with the check code's script model) and says why it was false
under this launch, from what the launch fixed: the script's arguments (`if args.distributed:` and
--distributed not passed; `if args.local_rank != -1:` and torchrun passes no --local_rank) and the variables
torchrun set in every rank (`if 'WORLD_SIZE' in os.environ and int(os.environ['WORLD_SIZE']) > 1:`).
"""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from mgtutor.diagnostics.check.launch_values import UNKNOWN, Launch, Leaf, evaluate
from mgtutor.diagnostics.check.run_facts import InitBranch, code_at, init_branches, init_calls
from mgtutor.diagnostics.check.script_model import ScriptModel
from mgtutor.diagnostics.failures.from_script.cuda_missing import frame_for
from mgtutor.diagnostics.failures.from_script.run_script import place, ran_model, rerun_text
from mgtutor.training.foundation.i18n import _, sentences

Finding = Any  # classify.Finding (classify calls this module)
KIND = "process_group_not_initialized"


def explain(findings: list[Finding], record: Any) -> list[Finding]:
    """A process_group_not_initialized finding of a run mgtutor launched gets the branch that skipped the
    init and why, instead of advice to launch with torchrun."""
    for finding in findings:
        if finding.kind != KIND:
            continue
        ran = ran_model(record)
        if ran is None:
            continue
        path, model = ran
        frame = frame_for(record, finding.rank, str(path))
        needed = _needed(frame)
        branches = init_branches(model)
        skipped = _skipped_branch(model, path, branches, launch_of(record, finding.rank))
        if skipped is not None:
            branch, leaves = skipped
            finding.summary = sentences(_skipped(model, path, branch, leaves, needed), finding.summary)
            finding.fix = _fix(record, path, branch, leaves)
        elif not init_calls(model):
            finding.summary = sentences(_("mgtutor run started every rank under torchrun, but {script} itself never "
                                          "calls init_process_group (it may be in a module it imports).").format(
                                              script=path.name), finding.summary)
            finding.fix = _("Call `dist.init_process_group()` once, before {needed}: torchrun has set RANK, "
                            "LOCAL_RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT in every rank, so it needs no "
                            "other argument than the backend (\"gloo\" on CPUs).").format(needed=needed)
        else:
            first = min(init_calls(model), key=lambda c: c.lineno)
            finding.fix = _("mgtutor run started every rank under torchrun; make init_process_group ({init}: `{code}`) "
                            "run before {needed} on every path the ranks take.").format(
                                init=place(path, first.lineno), code=code_at(model, first), needed=needed)
    return findings


def launch_of(record: Any, rank: int | None) -> Launch:
    """What the run fixed for `rank`: the script's arguments, torchrun's variables, the GPUs it saw."""
    meta = record.meta()
    target = list(meta.target)
    argv = target[2:] if target[:1] == ["-m"] else target[1:]
    rank = rank or 0
    local = meta.global_ranks.index(rank) if rank in meta.global_ranks else rank % max(meta.nproc_per_node, 1)
    env = dict(meta.env) | {"RANK": str(rank), "LOCAL_RANK": str(local), "WORLD_SIZE": str(meta.world_size),
                            "LOCAL_WORLD_SIZE": str(meta.nproc_per_node), "GROUP_RANK": str(meta.node_rank)}
    return Launch(argv, env, len(meta.devices))


def _needed(frame: dict[str, Any] | None) -> str:
    if frame is None:
        return _("the first line that needed the process group")
    code = f" (`{frame['code']}`)" if frame.get("code") else ""
    return f"{place(frame['file'], frame['line'])}{code}"


def _skipped_branch(model: ScriptModel, path: Path, branches: list[InitBranch],
                    launch: Launch) -> tuple[InitBranch, list[Leaf]] | None:
    """The first `if` around an init call that did not let it run under this launch (or cannot be worked
    out: the run's failure says it did not), with the leaves that fixed its value."""
    for branch in branches:
        value, leaves = evaluate(model, branch.node.test, launch, path)
        if value is UNKNOWN or bool(value) != branch.runs_when:
            return branch, leaves
    return None


def _skipped(model: ScriptModel, path: Path, branch: InitBranch, leaves: list[Leaf], needed: str) -> str:
    """One sentence: the init, the `if` that decides it, its value here, and why."""
    test = ast.get_source_segment(model.source, branch.node.test) or ast.unparse(branch.node.test)
    where = place(path, branch.line)
    if branch.via is not None:
        where = _("{where}, around `{call}` whose function calls it").format(where=where, call=branch.via.code)
    want = _("true") if branch.runs_when else _("false")
    why = "; ".join(leaf.why for leaf in leaves if leaf.value is not UNKNOWN)
    text = _("mgtutor run started every rank under torchrun, but your script skipped init_process_group ({init}): "
             "it runs only when `{test}` ({where}) is {want}, and under this launch it was not{because}. Then {needed} "
             "needed the process group.")
    return text.format(init=place(path, branch.init_line), test=" ".join(test.split()), where=where, want=want,
                       because=f": {why}" if why else "", needed=needed)


def _fix(record: Any, path: Path, branch: InitBranch, leaves: list[Leaf]) -> str:
    parts = []
    for leaf in leaves:
        option, flag = leaf.option, leaf.option.flag if leaf.option else ""
        if option is None or leaf.value is UNKNOWN:
            continue
        if leaf.action == "store_true" and leaf.value is False and branch.runs_when:
            parts.append(_("Pass {flag}: `{command}`.").format(flag=flag, command=rerun_text(record, flag)))
        elif "local_rank" in option.dest and leaf.value == -1:
            parts.append(_local_rank(flag, path))
        elif not parts:
            parts.append(_("Give {flag} the value the test needs under torchrun (this run had {value!r}).").format(
                flag=flag, value=leaf.value))
    parts.append(_("Or make the test hold whenever torchrun starts the script: torchrun sets RANK, LOCAL_RANK and "
                   "WORLD_SIZE in every rank (`if \"RANK\" in os.environ:`)."))
    return sentences(*parts)


def _local_rank(flag: str, path: Path) -> str:
    text = _("torchrun passes no {flag}: it sets LOCAL_RANK in every rank's environment, so the option keeps its "
             "default -1. Read it there after parsing: `args.local_rank = int(os.environ.get(\"LOCAL_RANK\", "
             "args.local_rank))`.").format(flag=flag)
    from mgtutor.diagnostics.check.script import CheckError, check_file  # the rules load only when asked

    try:
        fixable = any(f.rule == "local-rank-argument" and f.fix_safety for f in check_file(path))
    except (CheckError, OSError):
        fixable = False
    return sentences(text, _("`mgtutor check --fix {script}` writes it.").format(script=path)) if fixable else text
