"""`mgtutor runs stop ID` and `mgtutor runs attach ID`: a run controlled from any shell.

stop: the same stop as Ctrl+C in the command that started the run (every process of the run gets
SIGTERM, SIGKILL after the grace time; the record says `stopped`), also when that command is gone.
attach: every rank's new lines with the `[rank R]` prefixes and live warnings of `mgtutor run`,
through the one follow loop; Ctrl+C detaches (the run goes on) unless --stop; a run that ends
gets the same result line and diagnosis as `mgtutor run`. Called by tui/commands/runs.py.
"""
from __future__ import annotations

import argparse
import json
import sys
import time

from mgtutor.training.runs.control import stop_run
from mgtutor.training.runs.launcher import Run
from mgtutor.training.runs.records import RunRecord, RunStatus, find_run_why
from mgtutor.training.runs.watchers import live_watchers
from mgtutor.tui.commands.run import (
    FollowEnded,
    add_launch_options,
    describe_result,
    follow_exit_code,
    live_detectors,
    print_failure_diagnosis,
    stream_run,
)
from mgtutor.tui.errors import CliError


def add_control_options(parser: argparse.ArgumentParser, action: str) -> None:
    """The flags of `runs stop` and `runs attach`."""
    if action == "attach":
        parser.add_argument("--stop", action="store_true", help="Ctrl+C (or SIGTERM) stops the run instead of detaching")
        parser.add_argument("-v", "--verbose", action="store_true",
                            help="print torchrun's own tracebacks whole (default: one line saying where they are)")
    if action == "stop":
        parser.add_argument("--grace", type=float, default=10.0, metavar="S",
                            help="seconds between SIGTERM and SIGKILL (default 10)")


def default_detectors(run: Run) -> list:
    """The live warnings `mgtutor run` gives with its default flags."""
    parser = argparse.ArgumentParser(add_help=False)
    add_launch_options(parser)
    return live_detectors(run, parser.parse_args([]))


def the_run(run_id: str | None, action: str) -> RunRecord:
    if not run_id:
        raise CliError(f"{action}: give a run id (see `mgtutor runs`)")
    record, why = find_run_why(run_id)
    if record is None:
        raise CliError(why)
    return record


def is_detached(record: RunRecord, status: RunStatus | None = None) -> bool:
    """The run goes on and nobody follows it (no live heartbeat in its watchers/)."""
    return (status or record.status()) == RunStatus.RUNNING and not live_watchers(record)


def status_text(record: RunRecord, status: RunStatus | None = None) -> str:
    """"running", "running, detached" (nobody follows it), or how it ended."""
    status = status or record.status()
    return "running, detached" if is_detached(record, status) else status.value


def stop_main(args: argparse.Namespace) -> int:
    record = the_run(args.run_id, "stop")
    if not args.grace >= 0:
        raise CliError(f"--grace {args.grace:g}: give seconds >= 0")
    outcome = stop_run(record, grace=args.grace)
    if args.json:
        print(json.dumps(outcome.to_json(), indent=2))
        return 0 if outcome.clean else 1
    if outcome.was.terminal and not outcome.signalled:
        print(f"run {record.run_id} had already ended ({outcome.was}); no process of it is left")
        return 0
    killed = f", {len(outcome.killed)} needed SIGKILL" if outcome.killed else ""
    print(f"run {record.run_id} {outcome.status}: {outcome.signalled} process(es) got SIGTERM{killed}")
    if outcome.clean:
        print("no process of the run is left")
        return 0
    print(f"{len(outcome.survivors)} process(es) of the run survive:", file=sys.stderr)
    for proc in outcome.survivors:
        print(f"  pid {proc['pid']}: {proc['cmdline']}", file=sys.stderr)
    return 1


def attach_main(args: argparse.Namespace) -> int:
    record = the_run(args.run_id, "attach")
    status = record.status()
    run = Run(record)
    meta = record.meta()
    if status == RunStatus.RUNNING:
        age = f", started {time.time() - meta.started:.0f} s ago" if meta.started else ""
        how = "Ctrl+C stops it" if args.stop else "Ctrl+C detaches, the run goes on"
        print(f"mgtutor: attached to {record.run_id}: {meta.world_size} rank(s), backend {meta.backend}{age}; "
              f"new lines follow ({how})", file=sys.stderr, flush=True)
    else:
        print(f"mgtutor: run {record.run_id} has ended ({status}); its logs: mgtutor runs show {record.run_id}",
              file=sys.stderr, flush=True)
        if meta.problem:  # nothing to follow, and no numbers to make a result line of
            print(f"mgtutor: {meta.problem}; what the record still holds: mgtutor runs show {record.run_id}",
                  file=sys.stderr)
            return 1
    try:
        final = stream_run(run, detectors=default_detectors(run) if status == RunStatus.RUNNING else [],
                           verbose=args.verbose, attached=True, stop_on_interrupt=args.stop)
    except FollowEnded as end:
        return end.exit_code
    assert final.result is not None
    print(describe_result(final.result), file=sys.stderr)
    print_failure_diagnosis(run, final)
    print(f"run record: {record.path}", flush=True)
    return follow_exit_code(final)
