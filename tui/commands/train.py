"""`mgtutor train`: the built-in DDP trainer on N ranks, with per-rank progress and a summary table."""
from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from mgtutor.training.foundation.i18n import _, rjust_cells
from mgtutor.training.runs.forensics.compile_crash import CompileCrash, crashed_while_compiling
from mgtutor.training.runs.events.types import Event, StepEvent
from mgtutor.training.runs.launch.launcher import LaunchError, LaunchSpec, Run, launch, said_device_note
from mgtutor.training.runs.nvml import inventory
from mgtutor.training.runs.launch.control import deferred
from mgtutor.training.runs.follow.session import Update
from mgtutor.training.runs.follow.summary import TrainSummary, summarize
from mgtutor.training.runs.launch.train_options import TRAINER_MODULE, check_train_options, worker_argv
from mgtutor.tui.commands.train_help import add_train_options_said
from mgtutor.training.runs.follow.feed import Watch
from mgtutor.tui.commands.run import (
    FollowEnded,
    add_launch_options,
    add_verbose_option,
    follow_exit_code,
    live_watch,
    live_options_problem,
    node_options,
    print_end,
    put,
    say,
    stream_run,
)
from mgtutor.tui.errors import CliError

WORKER = ["-m", TRAINER_MODULE]
FAKE_MEMORY_ENV = "MGTUTOR_FAKE_CUDA_MEMORY"  # the tests' stand-in at the CUDA boundary (worker/batch/batchfind.py)


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "train", help=_("train a CNN with DDP on N ranks (synthetic data by default), with live progress"),
        description=_("Run mgtutor's own DDP trainer through torchrun. Rank 0 prints its progress, every rank "
                      "reports events; the run ends with a per-rank summary table and its run record."),
        epilog=_("examples:\n  mgtutor train --steps 50\n"
                 "  mgtutor train --model resnet18 --nproc 2 --batch-size 256 --steps 200\n"
                 "  mgtutor train --model resnet18 --batch-size 512 --cuda-graphs   (small images: ~5× faster)\n"
                 "  mgtutor train --data cifar10 --data-dir ~/data --workers 4 --amp off\n"
                 "  mgtutor train --inject hang-before-init --init-timeout 10   (see a real init timeout)\n"
                 "  mgtutor train --inject hang-before-init --init-timeout 30 --rendezvous-warn 5   (named after 5 s)\n\n"
                 "While it trains, warnings on stderr name a rank missing at the rendezvous, a straggler, or a silent\n"
                 "run; a failed run ends with the likely cause and its fix (more: mgtutor diagnose RUN_ID)."),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    add_launch_options(parser)
    add_verbose_option(parser)
    add_train_options_said(parser)
    parser.set_defaults(func=main)


def check(args: argparse.Namespace) -> str | None:
    problem = check_train_options(args) or live_options_problem(args)
    if problem:
        return problem
    if args.data_dir and not Path(args.data_dir).expanduser().is_dir():
        return _("--data-dir {folder}: no such folder").format(folder=args.data_dir)
    if args.cuda_graphs and args.backend == "auto" and not inventory().gpus:
        return _("--cuda-graphs needs NVIDIA GPUs, and none was found")
    if args.batch_size == "auto" and not os.environ.get(FAKE_MEMORY_ENV) and (args.backend == "gloo" or not inventory().gpus):
        return _("--batch-size auto measures GPU memory, and these ranks have no GPU (gloo runs them on the CPU): "
                 "give a number, e.g. --batch-size 64")
    if args.strategy != "ddp" and args.nproc not in (None, 1):
        return _("--strategy {strategy} runs one process: leave out --nproc or use --nproc 1").format(strategy=args.strategy)
    return None


def worker_target(args: argparse.Namespace) -> list[str]:
    data_dir = str(Path(args.data_dir).expanduser().resolve()) if args.data_dir else None
    ckpt = str(Path(args.checkpoint_dir).expanduser().resolve()) if args.checkpoint_dir else None
    return [*WORKER, *worker_argv(args, data_dir=data_dir, checkpoint_dir=ckpt)]


def progress_line(latest: dict[int, StepEvent], total: Any) -> str:
    parts = [_("r{rank} step {step}/{total} {speed:,.0f}/s").format(rank=rank, step=ev.step, total=total,
                                                                     speed=ev.samples_per_s or 0)
             for rank, ev in sorted(latest.items())]
    return _("progress: {ranks}").format(ranks=" · ".join(parts))


def follow_training(run: Run, total_steps: Any, out: TextIO = sys.stdout, every: float = 2.0,
                    watch: Watch | None = None, verbose: bool = False,
                    pending: Sequence[int] = ()) -> tuple[Update, list[Event]]:
    """`stream_run` plus a per-rank progress line every few seconds, from the step events;
    returns the final update and every event of the run (for the summary table)."""
    latest: dict[int, StepEvent] = {}
    events: list[Event] = []
    fresh, printed = False, time.monotonic()

    def progress(update: Update) -> None:
        nonlocal fresh, printed
        events.extend(update.events)
        for event in update.events:
            if isinstance(event, StepEvent):
                latest[event.rank], fresh = event, True
        if fresh and len(latest) > 1 and time.monotonic() - printed >= every:
            put(progress_line(latest, total_steps), out)
            fresh, printed = False, time.monotonic()

    return stream_run(run, out=out, watch=watch, on_update=progress, verbose=verbose, pending=pending), events


def _num(value: Any, fmt: str) -> str:
    return format(value, fmt) if isinstance(value, (int, float)) else "–"


def summary_table(summary: TrainSummary) -> str:
    headings = [rjust_cells("rank", 4), rjust_cells(_("steps"), 6), rjust_cells("samples/s", 11),
                rjust_cells(_("final loss"), 10), rjust_cells(_("peak MiB"), 9), rjust_cells(_("data wait"), 9),
                _("outcome")]
    lines = ["  ".join(headings)]
    for row in summary.ranks:
        step_s, wait = row.step_s, row.data_wait_s
        share = f"{100 * wait / step_s:.0f}%" if isinstance(wait, (int, float)) and step_s else "–"
        outcome = _("ok") if row.result else (row.error or _("no result"))[:60]
        lines.append(f"{row.rank:>4}  {_num(row.step, 'd'):>6}  {_num(row.samples_per_s, ',.0f'):>11}  "
                     f"{_num(row.loss, '.4f'):>10}  {_num(row.mem_peak_mib, ',.0f'):>9}  {share:>9}  {outcome}")
    if summary.complete:
        lines.append(rjust_cells(_("all"), 4) + f"  {'':>6}  {summary.samples_per_s:>11,.0f}")
    return "\n".join(lines)


def main(args: argparse.Namespace) -> int:
    problem = check(args)
    if problem:
        raise CliError(problem)
    exit_code, crash = train_once(args)
    if crash is None or args.compile == "off":
        return exit_code
    say("mgtutor: " + crash.said(args.nnodes))
    if args.nnodes > 1:  # one node alone cannot start the job again: its peers would not join
        return exit_code
    args.compile = "off"
    return train_once(args)[0]


def train_once(args: argparse.Namespace) -> tuple[int, CompileCrash | None]:
    """One run from launch to its record; the exit code, and a crash inside the compiler if that ended it."""
    nproc = 1 if args.strategy != "ddp" else args.nproc
    with deferred() as early:  # open from the launch to the exit: a signal is noted, then stops the run
        try:
            run = launch(LaunchSpec(target=worker_target(args), nproc=nproc, backend=args.backend,
                                    label=f"train-{args.model}", **node_options(args)))
        except LaunchError as exc:
            raise CliError(str(exc)) from None
        meta = run.record.meta()
        say("mgtutor: " + _("training {model} on {ranks} rank(s), backend {backend} — {device}").format(
            model=args.model, ranks=meta.world_size, backend=meta.backend, device=said_device_note(meta)))
        try:
            final, events = follow_training(run, args.steps or "epoch", watch=live_watch(args),
                                            verbose=args.verbose, pending=early.signals)
        except FollowEnded as end:
            return end.exit_code, None
        assert final.result is not None
        put(summary_table(summarize(events, meta.world_size)), sys.stdout)
        print_end(run, final)
        return follow_exit_code(final), crashed_while_compiling(final.result, events)
