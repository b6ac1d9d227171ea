"""`mgtutor runs stop ID` and `mgtutor runs attach ID`: a run controlled from any shell.

stop: the same stop as Ctrl+C in the command that started the run (every process of the run gets
SIGTERM, SIGKILL after the grace time; the record says `stopped`), also when that command is gone.
attach: every rank's new lines with the `[rank R]` prefixes and live warnings of `mgtutor run`,
through the one follow loop; Ctrl+C detaches (the run goes on) unless --stop; a run that ends
gets the same result line and diagnosis as `mgtutor run`. Called by tui/commands/runs/__init__.py.
"""
from __future__ import annotations

import argparse
import json
import sys
import time

from mgtutor.training.runs.launch.control import stop_run
from mgtutor.training.runs.launch.launcher import Run
from mgtutor.training.runs.records.record import RunRecord, RunStatus, find_run_why, said_problem
from mgtutor.training.runs.follow.heartbeats import live_watchers
from mgtutor.tui.commands.run import (
    LIVE,
    FollowEnded,
    follow_exit_code,
    print_end,
    stream_run,
)
from mgtutor.training.foundation.i18n import _
from mgtutor.training.foundation.terminal import neutralise
from mgtutor.tui.errors import CliError
from mgtutor.tui.run_words import status_word


def add_control_options(parser: argparse.ArgumentParser, action: str) -> None:
    """The flags of `runs stop` and `runs attach`."""
    if action == "attach":
        parser.add_argument("--stop", action="store_true", help=_("Ctrl+C (or SIGTERM) stops the run instead of detaching"))
        parser.add_argument("-v", "--verbose", action="store_true",
                            help=_("print torchrun's own tracebacks whole (default: one line saying where they are)"))
    if action == "stop":
        parser.add_argument("--grace", type=float, default=10.0, metavar="S",
                            help=_("seconds between SIGTERM and SIGKILL (default 10)"))


def the_run(run_id: str | None, action: str) -> RunRecord:
    if not run_id:
        raise CliError(_("{action}: give a run id (see `mgtutor runs`)").format(action=action))
    record, why = find_run_why(run_id)
    if record is None:
        raise CliError(why)
    return record


def is_detached(record: RunRecord, status: RunStatus | None = None) -> bool:
    """The run goes on and nobody follows it (no live heartbeat in its watchers/)."""
    return (status or record.status()) == RunStatus.RUNNING and not live_watchers(record)


def status_text(record: RunRecord, status: RunStatus | None = None) -> str:
    """"running", "running, detached" (nobody follows it), or how it ended, in the reader's words."""
    status = status or record.status()
    return status_word("running, detached" if is_detached(record, status) else status)


def stop_main(args: argparse.Namespace) -> int:
    record = the_run(args.run_id, "stop")
    if not args.grace >= 0:
        raise CliError(_("--grace {seconds:g}: give seconds >= 0").format(seconds=args.grace))
    outcome = stop_run(record, grace=args.grace)
    if args.json:
        print(json.dumps(outcome.to_json(), indent=2))
        return 0 if outcome.clean else 1
    if outcome.was.terminal and not outcome.signalled:
        print(_("run {id} had already ended ({status}); no process of it is left").format(
            id=record.run_id, status=status_word(outcome.was)))
        return 0
    killed = _(", {count} needed SIGKILL").format(count=len(outcome.killed)) if outcome.killed else ""
    print(_("run {id} {status}: {count} process(es) got SIGTERM{killed}").format(
        id=record.run_id, status=status_word(outcome.status), count=outcome.signalled, killed=killed))
    if outcome.clean:
        print(_("no process of the run is left"))
        return 0
    print(_("{count} process(es) of the run survive:").format(count=len(outcome.survivors)), file=sys.stderr)
    for proc in outcome.survivors:
        print(f"  pid {proc['pid']}: {proc['cmdline']}", file=sys.stderr)
    return 1


def attach_main(args: argparse.Namespace) -> int:
    record = the_run(args.run_id, "attach")
    status = record.status()
    run = Run(record)
    meta = record.meta()
    if status == RunStatus.RUNNING:
        age = _(", started {seconds:.0f} s ago").format(seconds=time.time() - meta.started) if meta.started else ""
        how = _("Ctrl+C stops it") if args.stop else _("Ctrl+C detaches, the run goes on")
        print("mgtutor: " + _("attached to {id}: {ranks} rank(s), backend {backend}{age}; new lines follow ({how})").format(
            id=record.run_id, ranks=meta.world_size, backend=neutralise(meta.backend), age=age, how=how),
            file=sys.stderr, flush=True)  # the backend is the record's word: no escape of it reaches the terminal
    else:
        print("mgtutor: " + _("run {id} has ended ({status}); its logs: {command}").format(
            id=record.run_id, status=status_word(status), command=f"mgtutor runs show {record.run_id}"), file=sys.stderr, flush=True)
        if meta.problem:  # nothing to follow, and no numbers to make a result line of
            print(f"mgtutor: {said_problem(meta.problem)}; " + _("what the record still holds: {command}").format(
                command=f"mgtutor runs show {record.run_id}"), file=sys.stderr)
            return 1
    try:
        final = stream_run(run, watch=LIVE if status == RunStatus.RUNNING else None,
                           verbose=args.verbose, attached=True, stop_on_interrupt=args.stop)
    except FollowEnded as end:
        return end.exit_code
    print_end(run, final)
    return follow_exit_code(final)
