"""The hang detector for RunSession: when the ranks stop moving, take their stacks, explain, alert.

    session = RunSession(record, run, detectors=[RunWatch(record), HangWatch(record)])
    ... update.new_alerts → a HangAlert whose `.report` is the HangReport (kind, ranks, where, fix)

The clock (training/runs/follow/stall.py) says when to look; looking costs one stack capture (well under
a second for 8 ranks). A look that finds every rank busy in its own code (still importing torch,
a long evaluation on every rank) is no hang: nothing is saved or shown, and it looks again later.
A hang is saved under stacks/<id>/ with report.json beside the stacks, so `mgtutor diagnose` and the
Monitor read the same report after the fact. On NCCL it first asks every rank for a Flight Recorder
dump (training/runs/forensics/flight.py) and reads it into the report.
"""
from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from mgtutor.diagnostics.failures.classify import Finding, diagnose_run
from mgtutor.diagnostics.failures.hang.analyse import HangReport, analyse_capture, analyse_texts
from mgtutor.diagnostics.failures.hang.flight_recorder import FlightRank, read_dumps
from mgtutor.diagnostics.failures.store_watch import StoreWatch
from mgtutor.training.runs.events.types import Event
from mgtutor.training.runs.forensics.flight import fr_dir, request_dump
from mgtutor.training.runs.records.record import RunRecord, RunStatus
from mgtutor.training.foundation.safe_io import write_private_atomic
from mgtutor.training.runs.forensics.stacks import capture_stacks, list_captures, rank_processes, save_capture
from mgtutor.training.runs.follow.stall import QUIET_S, StallClock
from mgtutor.training.runs.follow.detectors import Alert
from mgtutor.training.foundation.i18n import N_, _, sentences
from mgtutor.training.foundation.said import Said

STUCK = {"init", "collective"}  # with no kind found, only these are a hang (else: a long step, slow data)
CONFIRM_S = 2.0  # a second look this much later must find every rank in the same place
# CPU seconds the ranks' processes may burn between the two looks and still be "waiting": hung gloo ranks
# (lesson 14's three hangs, workers included) burn 0.00-0.02 s in 2 s; a rank that computes on a loaded
# machine (CI's three workers on two cores) got less than 0.5 s and was taken for stuck
BUSY_CPU_S = 0.15
REPORT_FILE = "report.json"


@dataclass(frozen=True)
class HangAlert(Alert):
    report: HangReport | None = None
    stop_run: bool = False  # the user asked to stop a run that hangs (mgtutor run --stop-on-hang)
    why: str = ""  # what the stall clock saw: "no output and no event from any rank for 6 s"

    def text(self, prefix: str = "mgtutor: ") -> str:
        head = prefix + _("the ranks stopped moving ({why}); each rank's stack says:").format(why=self.why)
        return head + "\n" + (prefix + self.report.text() if self.report else "")


def is_hang(report: HangReport) -> bool:
    """A kind was found, or every rank waits in init or a collective: worth a second look."""
    if report.kind is not None:
        return True
    categories = {w.where.category for w in report.where.values()}
    return bool(categories) and categories <= STUCK


def places(report: HangReport) -> tuple[Any, ...]:
    """Where every rank (and its busy worker) is: equal in two captures = nobody moved."""
    out = []
    for rank, w in sorted(report.where.items()):
        frame, worker = w.where.frame, w.worker.frame if w.worker and w.worker.frame else None
        out.append((rank, w.where.category, frame and (frame.file, frame.line),
                    worker and (worker.file, worker.line)))
    return tuple(out)


def take_report(record: RunRecord, reason: str, save: bool | None = None,
                expect: tuple[Any, ...] | None = None, flight: bool = True,
                native: bool = False) -> tuple[HangReport, Any]:
    """Capture now and explain; saved when `save`, or (None) when it shows a hang and, given `expect`,
    every rank is where that earlier look found it. The Flight Recorder is asked for a dump only then
    (a dump can take seconds). `report.places` is the stack-only place of every rank."""
    meta = record.meta()
    capture = capture_stacks(record, reason=reason, save=bool(save), native=native)
    report = analyse_texts(capture.texts(), capture.index(), meta.world_size)
    seen = places(report)
    confirmed = is_hang(report) and (expect is None or seen == expect)
    problems: list[str] = []
    if flight and (confirmed or save):
        mains = {p.rank: p.pid for p in capture.processes if p.role == "main"}
        dumps, problems = _flight(record, mains, wait_s=8.0 if meta.backend == "nccl" else 3.0)
        if dumps:
            report = analyse_texts(capture.texts(), capture.index(), meta.world_size, dumps)
    if save or (save is None and confirmed):
        save_capture(record, capture)
    report.capture = str(capture.path) if capture.path else None
    report.missing = list(capture.missing) + problems
    report.places = seen
    if capture.path is not None:
        report.stacks = {r: str(capture.path / f"rank{r}.txt") for r in report.where}
        _write_report(capture.path, report)
    return report, capture


def _flight(record: RunRecord, ranks: Mapping[int, int | None], wait_s: float) -> tuple[dict[int, FlightRank] | None, list[str]]:
    """Ask for a fresh dump, then read whatever dumps there are (a fresh one, or one from a timeout)."""
    request = request_dump(record, ranks, wait_s=wait_s)
    dumps = read_dumps(fr_dir(record))
    problems: list[str] = [Said(N_("Flight Recorder: {problem}"), problem=p) for p in request.problems]
    if not dumps:
        problems.append(Said(N_("Flight Recorder: no dump in the run's fr/ folder (a torch without it, or no NCCL group "
                                "yet)")))
    return dumps or None, problems


def _write_report(path: Path, report: HangReport) -> None:
    try:
        write_private_atomic(path / REPORT_FILE, json.dumps(report.to_dict(), indent=2) + "\n")
    except OSError:
        report.missing.append(Said(N_("report not saved: cannot write {path}"), path=str(path / REPORT_FILE)))


def latest_report(record: RunRecord) -> HangReport | None:
    """The hang report of the newest saved capture (re-read from its stacks), or None."""
    captures = list_captures(record)
    if not captures:
        return None
    meta = record.meta()
    return analyse_capture(captures[-1], meta.world_size, read_dumps(fr_dir(record)) or None)


def with_hang_finding(record: RunRecord, findings: Sequence[Finding]) -> list[Finding]:
    """The classifier's findings with the run's hang report first (a run that finished has none)."""
    out = list(findings)
    if record.status() == RunStatus.FINISHED:
        return out
    try:
        report = latest_report(record)
    except (OSError, ValueError):
        return out
    finding = report.finding() if report is not None else None
    if finding is None:
        return out
    return [finding] + [f for f in out if f.kind != finding.kind]


def diagnose_with_hangs(record: RunRecord) -> list[Finding]:
    """diagnose_run, plus the hang report saved in the run's stacks/ (what `mgtutor diagnose` shows)."""
    return with_hang_finding(record, diagnose_run(record))


def cpu_seconds(record: RunRecord) -> float:
    """CPU time used so far by every live process of the run's ranks (main processes and workers)."""
    total = 0.0
    for _rank, pid, _role in rank_processes(record)[0]:
        try:
            times = psutil.Process(pid).cpu_times()
        except psutil.Error:
            continue
        total += times.user + times.system
    return total


class HangWatch:
    """A Detector (training/runs/follow/detectors.py): observe(events), poll(state, now) → alerts that hold now."""

    def __init__(self, record: RunRecord, quiet_s: float = QUIET_S, stop_on_hang: bool = False) -> None:
        self.record = record
        self.stop_on_hang = stop_on_hang
        self.clock = StallClock(record, quiet_s=quiet_s)
        self.reports: list[HangReport] = []
        self._held: HangAlert | None = None
        self._spell: float | None = None
        self._first: HangReport | None = None  # the first look of this spell, waiting for its second
        self._confirm_at = 0.0
        self._cpu = 0.0
        self._why = ""
        self.store = StoreWatch(record)  # ranks that retry a store nobody answers print, so no stall shows them

    def observe(self, events: Sequence[Event]) -> None:
        self.clock.observe(events)

    def poll(self, state: Any, now: float) -> list[Alert]:
        stalled = self._poll_stall(state, now)  # first: a hang it confirms may show a store nobody answers
        return self.store.poll(state, now) + stalled

    def _poll_stall(self, state: Any, now: float) -> list[Alert]:
        why = self.clock.check(state, now)
        if self.clock.spell != self._spell:  # the ranks moved since the last look
            self._spell, self._held, self._first = self.clock.spell, None, None
        if why is not None:  # first look: stacks only, nothing saved
            self._why = why
            first, _capture = take_report(self.record, reason="stall", save=False, flight=False)
            if not is_hang(first):
                self.clock.not_stuck(now)
                return []
            self._first, self._confirm_at = first, now + CONFIRM_S
            self._cpu = cpu_seconds(self.record)
            return []
        if self._first is None or now < self._confirm_at:
            return [self._held] if self._held else []
        expect, self._first = self._first.places, None
        # CPU ranks that wait use no CPU; NCCL ranks may spin in cudaStreamSynchronize, so only gloo asks
        if self.record.meta().backend != "nccl" and cpu_seconds(self.record) - self._cpu > BUSY_CPU_S:
            self.clock.not_stuck(now)  # quiet, but computing: a long step or a slow batch
            return []
        # the second look is the one saved: with native frames (the ranks are stuck, a pause costs nothing)
        report, _capture = take_report(self.record, reason="stall", expect=expect, native=True)
        self.clock.absorb(time.time() + 2.0)  # NCCL logs a line per rank for the dump it was asked for
        if not is_hang(report) or report.places != expect:
            self.clock.not_stuck(now)  # somebody moved or computes: a long step or a slow batch, not a hang
            return []
        self.reports.append(report)
        self.store.saw_hang(report)
        self._held = HangAlert("hang", tuple(report.ranks), sentences(self._why + _("."), report.text()), report=report,
                               stop_run=self.stop_on_hang, why=self._why)
        return [self._held]
