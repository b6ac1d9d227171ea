"""`mgtutor fit -- SCRIPT ARGS`: the largest per-rank batch that trains the user's own script on every rank,
found by running it at a few batches (diagnostics/bench/scriptfit.py, scripttrial.py)."""
from __future__ import annotations

import argparse
import json
import os
import sys

from mgtutor.diagnostics.bench.fit_words import answer_lines, trial_line
from mgtutor.diagnostics.bench.scriptfit import DEFAULT_MARGIN_PCT, FitAnswer, FitSearch, FitTrial, command_for, given
from mgtutor.diagnostics.bench.scripttrial import DEFAULT_STEPS, NoDeviceMemory, TrialPlan, fit_script
from mgtutor.diagnostics.bench.fit_plan import FitError, plan_for
from mgtutor.training.foundation.i18n import N_, _
from mgtutor.training.runs.launch.launcher import LaunchError, LaunchSpec, Run, check_target, plan, said_device_note
from mgtutor.tui.errors import EXIT_FAILED, CliError
from mgtutor.tui.commands.options import add_backend, add_nproc, command_parser

HELP = N_("the largest batch that trains your script on every rank, found in a few trials")
DESCRIPTION = N_("Run SCRIPT at a few batch sizes, each for a few optimizer steps, and print the largest per-rank "
                 "batch that trains on every rank's GPU, the memory it takes, and the command to use. Each trial "
                 "is printed as it ends.")
EPILOG = N_("""examples:
  mgtutor fit -- train.py --batch-size 160
  mgtutor fit --nproc 4 -- train.py --bs 64 --grad-accum 2   (keeps the global batch with accumulation)
  mgtutor fit --batch-arg micro_bs -- train.py               (the option, when its name says nothing)
  mgtutor fit --json -- train.py

How it searches: each trial runs the script under torchrun at one batch (the batch option set on its
command line) and the ranks' hook ends it cleanly after --steps optimizer steps, with every rank's
peak GPU memory. A small batch and a far one pin a straight line (fixed bytes + bytes per sample),
the line predicts the largest batch, and trials at the prediction and next to it confirm it to 2
{percent}. An out-of-memory on any rank ends that trial on every rank; the script's own code is never
changed. Each trial is a run record (mgtutor runs).""")


def register(sub: argparse._SubParsersAction) -> None:
    p = command_parser(sub, "fit", HELP, DESCRIPTION, EPILOG)
    add_nproc(p, help=N_("ranks (default: one per GPU)"))
    add_backend(p)
    p.add_argument("--batch-arg", default=None, metavar="NAME",
                   help=_("the script's per-rank batch option (default: found in its argparse options)"))
    p.add_argument("--steps", type=int, default=DEFAULT_STEPS, metavar="K",
                   help=_("optimizer steps per trial (default 3: the optimizer's state exists from step 1)"))
    p.add_argument("--max-batch", type=int, default=None, metavar="B", help=_("never try a batch above B"))
    p.add_argument("--margin", type=float, default=DEFAULT_MARGIN_PCT, metavar="PCT",
                   help=_("GPU memory kept free below the largest batch in the recommendation, in %% (default 5)"))
    p.add_argument("--trial-timeout", type=float, default=600.0, metavar="S",
                   help=_("give up on a trial after S seconds (default 600)"))
    p.add_argument("--json", action="store_true", help=_("print one JSON object with every trial and the answer"))
    p.add_argument("target", nargs=argparse.REMAINDER, metavar="-- SCRIPT [ARGS…]",
                   help=_("the script and its arguments, after --"))
    p.set_defaults(func=main)


def problem(args: argparse.Namespace) -> str | None:
    for flag, value in (("--steps", args.steps), ("--max-batch", args.max_batch), ("--nproc", args.nproc)):
        if value is not None and value < 1:
            return _("{flag} must be at least 1").format(flag=flag)
    if not 0 <= args.margin < 50:
        return _("--margin is a percentage of the GPU memory: 0 or more, below 50")
    if not args.trial_timeout > 0:
        return _("--trial-timeout must be more than 0 seconds")
    return None


def prepare(args: argparse.Namespace) -> TrialPlan:
    target = args.target[1:] if args.target[:1] == ["--"] else args.target
    said = problem(args)
    if said:
        raise CliError(said)
    try:
        plan(LaunchSpec(target=target, nproc=args.nproc, backend=args.backend))
        target = check_target(target)
        return plan_for(target, args.nproc, args.backend, args.batch_arg, args.steps, args.trial_timeout, os.getcwd())
    except (LaunchError, FitError) as exc:
        raise CliError(str(exc)) from None


def main(args: argparse.Namespace) -> int:
    trial_plan = prepare(args)
    out = sys.stderr if args.json else sys.stdout
    now = given(trial_plan.target, trial_plan.option)
    print("mgtutor: " + _("the largest batch of {script} ({option}{now}); each trial runs it for {steps} optimizer "
                          "step(s)").format(script=trial_plan.target[0], option=trial_plan.option.flag, steps=args.steps,
                                            now="" if now is None else _(", {batch} in your command").format(batch=now)),
          file=sys.stderr, flush=True)
    search = FitSearch(max_batch=args.max_batch)
    world: list[int] = []

    def on_trial(trial: FitTrial) -> None:
        print(trial_line(len(search.trials), trial), file=out, flush=True)

    def on_start(run: Run) -> None:
        if not world:
            meta = run.record.meta()
            world.append(meta.world_size)
            print("mgtutor: " + _("{ranks} rank(s) — {device}").format(ranks=meta.world_size,
                                                                      device=said_device_note(meta)),
                  file=sys.stderr, flush=True)

    try:
        answer = fit_script(trial_plan, search, args.margin, on_trial, on_start)
    except NoDeviceMemory as exc:
        raise CliError(str(exc)) from None
    except LaunchError as exc:
        raise CliError(str(exc), EXIT_FAILED) from None
    return report(args, trial_plan, answer, world[0] if world else 1)


def report(args: argparse.Namespace, trial_plan: TrialPlan, answer: FitAnswer, world: int) -> int:
    accumulation = trial_plan.accumulation
    command = command_for(trial_plan.target, answer.recommended, world, trial_plan.option, accumulation) \
        if answer.largest else None
    if args.json:
        out = {"script": trial_plan.target[0], "batch_option": trial_plan.option.flag,
               "accumulation_option": accumulation.flag if accumulation else None,
               "batch_in_command": given(trial_plan.target, trial_plan.option), "world_size": world,
               "steps_per_trial": args.steps, **answer.to_json(),
               "command": command.to_json(args.nproc) if command else None}
        print(json.dumps(out, indent=2))
    elif answer.largest:
        print("\n".join(answer_lines(answer, command, args.nproc, args.steps)))
    if answer.error:
        raise CliError(_("the script fails at every batch tried, for a reason other than memory: {error}").format(
            error=answer.error), EXIT_FAILED)
    if not answer.largest:
        raise CliError(_("no batch trains on every rank, not even {batch}: the fixed part (weights, gradients, "
                         "optimizer state) leaves too little memory").format(
            batch=min((t.batch for t in answer.trials), default=1)), EXIT_FAILED)
    return 0
