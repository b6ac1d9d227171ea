"""What `mgtutor fit` says, for the CLI and the screens alike: a line per trial as it ends, then the answer
and the command to use, in the language in force."""
from __future__ import annotations

import shlex

from mgtutor.diagnostics.bench.maxbatch import LABEL_CELLS, padded
from mgtutor.diagnostics.bench.scriptfit import FitAnswer, FitCommand, FitTrial
from mgtutor.diagnostics.failures.oom.explain import gib
from mgtutor.training.foundation.i18n import N_, _


def trial_line(number: int, trial: FitTrial) -> str:
    if trial.fits:
        verdict = _("trains on every rank, peak {peak} of {budget}").format(peak=gib(trial.peak_bytes),
                                                                          budget=gib(trial.budget_bytes))
    elif trial.oom_ranks:
        ranks = ", ".join(map(str, trial.oom_ranks))
        verdict = (_("out of memory on rank {ranks}") if len(trial.oom_ranks) == 1 else
                   _("out of memory on ranks {ranks}")).format(ranks=ranks)
    else:
        verdict = _("failed: {error}").format(error=trial.error or "?")
    return _("trial {number:>2}  {phase:<7}  batch {batch:>6}  {verdict}  ({seconds:.1f} s)").format(
        number=number, phase=trial.phase, batch=trial.batch, verdict=verdict, seconds=trial.seconds)


def answer_lines(answer: FitAnswer, command: FitCommand | None, nproc: int | None, steps: int) -> list[str]:
    """The answer, one labelled line per fact, and the command to use last."""
    facts = [(N_("largest batch"), _("{batch} per rank trains on every rank ({steps} steps at it)").format(
        batch=answer.largest, steps=steps))]
    if answer.line is not None:
        facts.append((N_("memory"), _("{fixed} fixed + {sample} per sample; {budget} usable per rank").format(
            fixed=gib(answer.line.fixed_bytes), sample=gib(answer.line.per_sample_bytes),
            budget=gib(answer.budget_bytes))))
    if answer.predictions:
        facts.append((N_("predicted"), " → ".join(map(str, answer.predictions))))
    facts.append((N_("search"), _("{count} trials in {seconds:.1f} s").format(
        count=len(answer.trials), seconds=sum(t.seconds for t in answer.trials))))
    facts.append((N_("recommended"), _("{batch} per rank ({margin} of the GPU memory kept free)").format(
        batch=answer.recommended, margin=f"{answer.margin_pct:g} %")))
    if command is not None:
        facts.append((N_("global batch"), global_words(command)))
    lines = [padded(_(label), LABEL_CELLS) + value for label, value in facts]
    if command is not None:
        lines.append(padded(_("command"), LABEL_CELLS) + shlex.join(command.run_argv(nproc)))
    return lines


def global_words(command: FitCommand) -> str:
    shown = _("{total} = {per_rank} per rank × {accumulation} accumulation × {ranks} rank(s)").format(
        total=command.global_batch, per_rank=command.per_rank, accumulation=command.accumulation or 1,
        ranks=command.world_size)
    if command.user_global is None or command.user_global == command.global_batch:
        return shown
    if command.accumulation is None:
        return shown + _(" (your command's was {was}; the script has no gradient accumulation option: scale the "
                         "learning rate with the batch, lesson 08)").format(was=command.user_global)
    return shown + _(" (your command's was {was})").format(was=command.user_global)
