"""Run control from any terminal: what a follower does on a signal, and stopping a run by its record.

A command that follows a run (`mgtutor run`, `train`, `runs attach`) turns the signals a terminal,
`kill`, `timeout`, CI or `docker stop` send into an exception its follow loop raises at its next turn:

    with follow_signals() as caught:
        for update in session.updates():
            caught.check()
    # SIGINT (Ctrl+C) and SIGTERM raise Interrupted(signum); SIGHUP (the terminal is gone) raises it
    # with detach=True: the run goes on, nobody watches it.

`Interrupted` is a KeyboardInterrupt, so every cleanup written for Ctrl+C also runs for SIGTERM.
A signal the command inherited as ignored (`nohup`, a shell's background job) stays ignored.
While the stop itself runs (`deferred()`), further signals are only noted: a second Ctrl+C must not
leave half the ranks running.
"""
from __future__ import annotations

import signal
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

from mgtutor.training.runs.launch.launcher import Run
from mgtutor.training.runs.launch.procs import describe, run_processes
from mgtutor.training.runs.launch.rank import signal_name
from mgtutor.training.runs.records.record import RunRecord, RunStatus

FOLLOW_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)  # SIGQUIT (Ctrl+\) as Ctrl+C


class Interrupted(KeyboardInterrupt):
    """The follower got `signum`; `detach`: leave the run going (SIGHUP), else stop it (or, for a
    follower that only attached, detach: the command decides)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal_name(signum))
        self.signum = signum

    @property
    def detach(self) -> bool:
        return self.signum == signal.SIGHUP

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


@dataclass
class Caught:
    """The signal `follow_signals` noted; the follow loop calls `check()` on each turn, which raises it.
    The handler itself never raises: an exception from a handler lands at whatever bytecode runs, in
    library code between taking a lock and the `try` that frees it (Popen.poll's waitpid lock: the stop's
    wait for the supervisor then blocks for ever), or in a finalizer, which drops it."""
    signum: int | None = None

    def check(self) -> None:
        if self.signum is not None:
            raise Interrupted(self.signum)


@contextmanager
def follow_signals(noted: Sequence[Sequence[int]] = ()) -> Iterator[Caught]:
    """SIGINT, SIGTERM and SIGHUP are noted in the yielded `Caught` while the block runs, once: the first
    hands the signals back to the handlers that were there before (inside `deferred()` they are only
    noted), so a second Ctrl+C cannot land between the first and the stop it asked for. The loop inside
    raises it with `caught.check()` (a session yields at least every STATE_S while the run goes).
    `noted`: lists where signals that came before the block were noted (while launching): the last
    of them is raised at once, after these handlers are in place, so none falls between two."""
    previous: dict[int, Any] = {}
    caught = Caught()

    def restore() -> None:
        for signum, handler in previous.items():
            signal.signal(signum, handler)

    def note_once(signum: int, _frame: FrameType | None) -> None:
        restore()
        caught.signum = signum

    for sig in FOLLOW_SIGNALS:
        if signal.getsignal(sig) is signal.SIG_IGN:
            continue  # nohup / a background job: the user asked for this signal to be ignored
        previous[sig] = signal.signal(sig, note_once)
    try:
        earlier = [signum for signals in noted for signum in signals]
        if earlier:
            note_once(earlier[-1], None)
            caught.check()
        yield caught
    finally:
        restore()


@dataclass
class Deferred:
    """Signals that came while a stop ran: the last one decides the exit code."""
    signals: list[int] = field(default_factory=list)


@contextmanager
def deferred() -> Iterator[Deferred]:
    """While the block runs (stopping every rank), the follow signals are only noted."""
    got = Deferred()
    previous: dict[int, Any] = {}

    def note(signum: int, _frame: FrameType | None) -> None:
        got.signals.append(signum)

    for sig in FOLLOW_SIGNALS:
        if signal.getsignal(sig) is not signal.SIG_IGN:
            previous[sig] = signal.signal(sig, note)
    try:
        yield got
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


@dataclass
class StopOutcome:
    """What `stop_run` found and did; `to_json` is `mgtutor runs stop --json`."""
    run_id: str
    was: RunStatus  # the status before the stop
    status: RunStatus  # after it
    signalled: int = 0  # processes that got SIGTERM
    killed: list[dict[str, object]] = field(default_factory=list)  # needed SIGKILL
    survivors: list[dict[str, object]] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not self.survivors

    def to_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "was": self.was.value, "status": self.status.value,
                "signalled": self.signalled, "killed": self.killed, "survivors": self.survivors,
                "clean": self.clean}


def stop_run(record: RunRecord, grace: float = 10.0) -> StopOutcome:
    """Stop a run from any process, as Ctrl+C in the command that started it would: every process
    of the run (the supervisor's group, torchrun, each rank's session) gets SIGTERM, SIGKILL after
    `grace` s; the record says `stopped`. A run that has ended is left as it is, unless processes of
    it still live (a lost run's orphans): those are stopped too."""
    was = record.status()
    if was.terminal and not run_processes(record.run_id, None, record):
        return StopOutcome(record.run_id, was, was)
    with deferred():
        result = Run(record).stop(grace=grace)
    report = result.stop
    if report is None:  # Run.stop always writes one; a record rewritten meanwhile is looked at afresh
        return StopOutcome(record.run_id, was, result.status,
                           survivors=describe(run_processes(record.run_id, None, record)))
    return StopOutcome(record.run_id, was, result.status, signalled=report.processes,
                       killed=list(report.killed), survivors=list(report.survivors))
