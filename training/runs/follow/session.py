"""The one follow loop: everything a consumer learns about a run, as typed updates.

    session = RunSession(run.record, run, diagnose=diagnose_run)
    for update in session.updates():       # blocks; sleeps POLL_S between empty polls
        print_lines(update.lines)          # new log lines, per rank (rank None: torchrun)
        ...update.events, update.state, update.new_alerts...
        if update.final: result, findings = update.result, update.findings
    final = session.stop()                 # Ctrl+C / timeout: stop every rank, then drain

Decided here, once, for every consumer (CLI run/train, Monitor, lessons, bench, probe, demos):
- poll interval: POLL_S between polls that found nothing, IDLE_POLL_S once nothing came for
  IDLE_AFTER_S (a quiet rank must not share its core with a busy follower); a busy run is read
  without pause, at most READ_BUDGET bytes per file per poll (back-pressure: the consumer pulls);
- the run's state (RunStateFolder, from events + rank records + result) refreshes at STATE_S;
- the detectors (training/runs/follow/detectors.py, or any `Detector`) run every ALERT_S while the run goes;
  `alerts` is what holds now, `new_alerts` what was not shown before (each once);
- torchrun's own tracebacks (ChildFailedError, SignalException: 25-55 lines) come out as one line
  ("torchrun reported the failure of rank 1 …; its traceback … is in torchrun.log") unless
  `verbose`; the file keeps them whole (training/runs/follow/torchrun_fold.py);
- a follower of a live run keeps a heartbeat in the run dir (training/runs/follow/heartbeats.py) so
  `mgtutor runs` tells a watched run from a detached one; `watcher=None` follows without one;
- the end: once the run is over, every log and the events are drained, then one `final` update
  carries the result and the injected `diagnose(record)` findings (this layer cannot import the
  classifier: diagnostics sits above it). Every ended run is diagnosed (a run that finished can
  still have trained on the same data on every rank) except one the user stopped; a view decides
  which findings it shows (the CLI: a failed or lost run's).
Headless and torch-free; never raises for a detector's or the classifier's bug.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from mgtutor.training.runs.events.reader import EventReader
from mgtutor.training.runs.events.types import Event
from mgtutor.training.runs.launch.launcher import Run
from mgtutor.training.runs.records.record import RunRecord, RunResult, RunStatus
from mgtutor.training.runs.follow.runstate import RunState, RunStateFolder
from mgtutor.training.runs.follow.tail import CHUNK, LineTuple, RunTail
from mgtutor.training.runs.follow.torchrun_fold import LineFolder
from mgtutor.training.runs.follow.heartbeats import Heartbeat
from mgtutor.training.runs.follow.detectors import Alert, Detector

POLL_S = 0.05  # sleep between polls that found nothing new, while the run has been talking
IDLE_POLL_S = 0.25  # after IDLE_AFTER_S of nothing new: a quiet run costs its follower ~5× less CPU
IDLE_AFTER_S = 1.0
STATE_S = 0.25  # state snapshots at most 4 Hz
ALERT_S = 1.0  # detectors read files and sockets: once a second, never once per line
READ_BUDGET = 4 * CHUNK  # bytes per log file per poll
MAX_INT = 1 << 63  # a whole number beyond this in an event is no measurement (a 400-digit loss kills float())
MAX_RANK = 1 << 24

Diagnose = Callable[[RunRecord], Sequence[Any]]


@dataclass
class Update:
    """What one poll of the run found. Only what changed is set; `final` is the last update."""
    lines: list[LineTuple] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    state: RunState | None = None  # a copy, at most every STATE_S (and on the final update)
    alerts: list[Alert] | None = None  # what the detectors report now; None: not polled this time
    new_alerts: list[Alert] = field(default_factory=list)  # not reported before (each alert once)
    detector_error: str | None = None  # the detectors broke and are off for this run
    final: bool = False
    result: RunResult | None = None  # on the final update
    findings: list[Any] = field(default_factory=list)  # diagnose(record) on the final update
    diagnose_error: str | None = None  # the classifier broke: the run's own outcome still stands
    stopped: bool = False  # the session stopped the run (stop() or its timeout)
    stop_signal: int | None = None  # the signal the consumer stopped it for (SIGINT: Ctrl+C, SIGTERM, …)
    timed_out: bool = False

    def __bool__(self) -> bool:
        return bool(self.lines or self.events or self.state is not None or self.alerts is not None or self.final)


class RunSession:
    """Follows one run (launched here, or only a record on disk) until it ends."""

    def __init__(self, record: RunRecord, run: Run | None = None, *, detectors: Sequence[Detector] = (),
                 diagnose: Diagnose | None = None, timeout_s: float | None = None,
                 include_torchrun: bool = True, clock: Callable[[], float] = time.time,
                 alive: Callable[[], bool] | None = None, verbose: bool = False, from_start: bool = True,
                 watcher: str | None = "mgtutor") -> None:
        self.record = record
        self.run = run
        self.alive = alive  # how to tell the run still goes (default: the Run, else the record)
        self.detectors = list(detectors)
        self.diagnose = diagnose
        self.timeout_s = timeout_s
        self.clock = clock  # wall time for the state (tests replay a fixed moment)
        self.tail = RunTail(record, include_torchrun=include_torchrun, from_start=from_start)
        self.folder_lines = None if verbose else LineFolder()  # verbose: torchrun's tracebacks whole
        self.heartbeat = Heartbeat(record, watcher) if watcher else None
        self.events = EventReader(record.events_path)
        self.folder = RunStateFolder(record, alive=self._alive)
        self.shown: set[tuple[str, tuple[int, ...]]] = set()
        self._began = time.monotonic()
        self._next_state = self._next_alert = 0.0
        self._unfolded: list[Event] = []  # events read since the last state refresh
        self._finished: Update | None = None
        self._stopped = self._timed_out = False
        self._stop_signal: int | None = None
        self._implausible = 0

    def _alive(self) -> bool:
        if self.alive is not None:
            return self.alive()
        if self.run is not None:
            return self.run.running()
        return self.record.status() == RunStatus.RUNNING

    @property
    def skipped_events(self) -> int:
        """Lines of events.jsonl that broke their schema or held no usable number (counted, never raised)."""
        return self.events.skipped + self._implausible

    def _read_events(self, everything: bool = False) -> list[Event]:
        events = self.events.read_all() if everything else self.events.poll()
        kept = [event for event in events if plausible(event)]
        self._implausible += len(events) - len(kept)
        return kept

    def updates(self) -> Iterator[Update]:
        """Updates until the run has ended and everything it wrote is read; the last has `final`."""
        quiet_since = time.monotonic()
        try:
            while self._finished is None:
                if self.timeout_s is not None and time.monotonic() - self._began > self.timeout_s:
                    self._timed_out = True
                    yield self.stop(grace=5.0)
                    return
                update = self.poll()
                if update:
                    yield update
                if update.final:
                    return
                if update.lines or update.events:
                    quiet_since = time.monotonic()
                else:
                    time.sleep(IDLE_POLL_S if time.monotonic() - quiet_since > IDLE_AFTER_S else POLL_S)
        finally:
            self.close()  # also when the consumer walks away (detaches) mid-run

    def close(self) -> None:
        """Stop following without stopping the run: no one watches through this session any more."""
        if self.heartbeat is not None:
            self.heartbeat.stop()

    def _fold(self, lines: list[LineTuple], last: bool = False) -> list[LineTuple]:
        if self.folder_lines is None:
            return lines
        return self.folder_lines.feed(lines) + (self.folder_lines.flush() if last else [])

    def poll(self) -> Update:
        """One poll: new lines and events; the state and detectors when their time has come."""
        if self._finished is not None:
            return Update()
        running = self._alive()
        if not running:
            return self.finish()
        if self.heartbeat is not None:
            self.heartbeat.beat()
        update = Update(lines=self._fold(self.tail.poll(READ_BUDGET)), events=self._read_events())
        now = time.monotonic()
        self._observe(update.events)
        self._unfolded += update.events
        if now >= self._next_state:
            self._next_state = now + STATE_S
            state = self.folder.refresh(self.clock(), self._unfolded)
            self._unfolded = []
            update.state = state.snapshot()
            if now >= self._next_alert:
                self._next_alert = now + ALERT_S
                self._poll_detectors(update, state)
        return update

    def _observe(self, events: list[Event]) -> None:
        for detector in list(self.detectors):
            try:
                detector.observe(events)
            except Exception:  # noqa: BLE001 - reported on the next detector poll
                pass

    def _poll_detectors(self, update: Update, state: RunState) -> None:
        if not self.detectors or state.done:
            return
        alerts: list[Alert] = []
        try:
            for detector in self.detectors:
                alerts += detector.poll(state, self.clock())
        except Exception as exc:  # a detector bug must never stop the run's output
            self.detectors = []
            update.detector_error = f"{type(exc).__name__}: {exc}"
            return
        update.alerts = alerts
        for alert in alerts:
            if (alert.kind, alert.ranks) not in self.shown:
                self.shown.add((alert.kind, alert.ranks))
                update.new_alerts.append(alert)

    def finish(self) -> Update:
        """The run is over: drain every log and the events, fold the last state, read the result."""
        if self._finished is not None:
            return self._finished
        self.close()
        lines = self._fold(self.tail.drain(), last=True)
        events = self._read_events(everything=True)
        self._observe(events)
        result = self.run.wait() if self.run is not None else self.record.result()
        state = self.folder.refresh(self.clock(), self._unfolded + events)
        self._unfolded = []
        findings: list[Any] = []
        broke = None
        if self.diagnose is not None and not (self._stopped and not self._timed_out):
            try:
                findings = list(self.diagnose(self.record))
            except Exception as exc:  # the run's own outcome matters more than a classifier bug
                broke = f"{type(exc).__name__}: {exc}"
        self._finished = Update(lines=lines, events=events, state=state.snapshot(), alerts=[], final=True,
                                result=result, findings=findings, diagnose_error=broke, stopped=self._stopped,
                                timed_out=self._timed_out, stop_signal=self._stop_signal)
        return self._finished

    def stop(self, grace: float = 10.0, signum: int | None = None) -> Update:
        """Stop every process of the run (SIGTERM, then SIGKILL after `grace` s), then drain: the final
        update. `signum`: the signal the consumer got (its exit code is 128 + signum)."""
        if self._finished is None and self.run is not None:
            self._stopped, self._stop_signal = True, signum
            self.run.stop(grace=grace)
        return self.finish()


def plausible(event: Event) -> bool:
    """An event a follower can fold: its rank is one, and no whole number in it is beyond 64 bits
    (valid JSON, and a schema's int, but float() of it raises): such a line is skipped like a torn one."""
    if not isinstance(event.rank, int) or not 0 <= event.rank < MAX_RANK:
        return False
    return all(not isinstance(value, int) or -MAX_INT < value < MAX_INT for value in vars(event).values())


def follow_to_end(session: RunSession, on_line: Callable[[int | None, str], None] | None = None) -> Update:
    """Every rank line to `on_line` as it comes, until the run ends; returns the final update. Leaving
    early (an exception in `on_line`, or in the caller's thread) stops the run: no rank outlives it."""
    final = None
    try:
        for update in session.updates():
            if on_line:
                for rank, _stream, line in update.lines:
                    on_line(rank, line)
            if update.final:
                final = update
    finally:
        final = final or session.stop()
    return final
