"""Live failure detectors for a running job, polled by the one follow loop (training/runs/follow/session.py).

A detector sees every event once (`observe`) and is asked for the alerts that hold now
(`poll(state, now)`, about once a second, only while the run goes). The session owns the
timing and shows each new alert once; a new detector (hang forensics, …) is one more object in
`RunSession(detectors=[…])`.

    watch = RunWatch(record)                # rendezvous_after=30 s, silent_after=120 s

- `rendezvous_late`: after `rendezvous_after` s some ranks have not reached init_process_group. A rank
  is "at the rendezvous" once it has a TCP connection to the store (MASTER_PORT) or sent a
  rendezvous/step event, so the missing rank is named while the others wait, minutes before
  PyTorch's own 10–30 minute timeout.
- `straggler`: a rank's own per-step time (our workers' data_wait_s) dwarfs the others', or it is
  many steps behind. The trainer logs the same steps on every rank, so a lag in logged steps is news at
  once. The ranks' hook in a user's script (`origin: "hook"`) logs when each rank's own clock says so
  (a multiple of 10 steps at least a second after its last log point): ranks in lockstep may log a
  stride apart for a second or two. There a rank is named when it is STEP_LAG steps behind, has logged
  no step for HOOK_QUIET_FACTOR times the ranks' usual time between step events (at least
  HOOK_QUIET_S), and a rank ahead of it logged a step within that time: its steps stopped while
  another's go on (when every rank stops, that is the hang watch's to say).
- `possibly_hung`: no log line and no event for `silent_after` s; each rank's last lines are attached.
Headless: psutil and files only, never torch.
"""
from __future__ import annotations

import os
import statistics
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import psutil

from mgtutor.training.runs.events.types import Event, EventType, StepEvent
from mgtutor.training.runs.events.checks import stragglers
from mgtutor.training.foundation.i18n import _, ngettext
from mgtutor.training.foundation.said import said_again
from mgtutor.training.runs.records.record import RunRecord
from mgtutor.training.runs.follow.runstate import RunState
from mgtutor.training.foundation.safe_io import open_regular

JOINED_TYPES = {EventType.RENDEZVOUS, EventType.STEP, EventType.EPOCH, EventType.CHECKPOINT, EventType.RESULT}
RECENT_STEPS = 20
STEP_LAG = 5
HOOK_QUIET_S = 3.0  # a hook-measured rank is not called stopped before this long without a step event
HOOK_QUIET_FACTOR = 3.0  # … nor before this many times the ranks' median time between step events


@dataclass(frozen=True)
class Alert:
    kind: str  # rendezvous_late | straggler | possibly_hung
    ranks: tuple[int, ...]
    message: str
    last_lines: dict[int, list[str]] = field(default_factory=dict)


class Detector(Protocol):
    def observe(self, events: Sequence[Event]) -> None:
        """Every new event, once, in file order."""

    def poll(self, state: RunState, now: float) -> list[Alert]:
        """The alerts that hold now (called about once a second while the run goes)."""


def rendezvous_message(late: list[int], never_started: list[int], waiting: list[int], seconds: float) -> str:
    """Who is missing at the rendezvous, who waits for them, and where to look, in the language in force."""
    def names(ranks: list[int]) -> str:
        return ", ".join(map(str, ranks))

    parts = [ngettext("rank {ranks} not at the rendezvous after {seconds:.0f} s",
                      "ranks {ranks} not at the rendezvous after {seconds:.0f} s", len(late)).format(
        ranks=names(late), seconds=seconds)]
    if never_started:
        parts.append(_("(never started: {ranks})").format(ranks=names(never_started)))
    if waiting:
        wait = (ngettext("while rank {ranks} waits for them", "while ranks {ranks} wait for them", len(waiting))
                if len(late) > 1 else
                ngettext("while rank {ranks} waits for it", "while ranks {ranks} wait for it", len(waiting)))
        parts.append(wait.format(ranks=names(waiting)))
    return " ".join(parts) + _("; check that rank's log: it may be stuck before init_process_group.")


class RunWatch:
    """The three detectors of a live run: late rendezvous, a straggler, a silent (possibly hung) run."""

    def __init__(self, record: RunRecord, rendezvous_after: float = 30.0, silent_after: float = 120.0) -> None:
        self.record = record
        self.rendezvous_after = rendezvous_after or float("inf")  # 0 turns a warning off
        self.silent_after = silent_after or float("inf")
        self._joined: set[int] = set()
        self._steps: dict[int, deque[StepEvent]] = {}
        self._last_event = 0.0

    def observe(self, events: Sequence[Event]) -> None:
        for event in events:
            self._last_event = max(self._last_event, event.t)
            if event.type in JOINED_TYPES:
                self._joined.add(event.rank)
            if isinstance(event, StepEvent):
                self._steps.setdefault(event.rank, deque(maxlen=RECENT_STEPS)).append(event)

    def poll(self, state: RunState, now: float) -> list[Alert]:
        if state.done:
            return []
        alerts = [a for a in (self._rendezvous(state, now), self._silence(state, now)) if a]
        return alerts + self._stragglers(now)

    def _rendezvous(self, state: RunState, now: float) -> Alert | None:
        world = state.world_size
        started = state.started or now
        if not world or now - started < self.rendezvous_after or len(self._joined) >= world:
            return None
        infos = {i.rank: i for i in self.record.ranks()}
        never_started = [r for r in range(world) if r not in infos]
        waiting: list[int] = []
        missing: list[int] = []
        for rank in range(world):
            if rank in self._joined:
                waiting.append(rank)
            elif rank in infos:
                (waiting if _at_store(infos[rank].pid) else missing).append(rank)
        if not missing and not never_started:
            return None  # everyone is at the store: a slow init, not a missing rank
        if not waiting and not never_started:
            return None  # nobody waits for them: the script may not use a process group (yet)
        late = sorted(missing + never_started)
        message = rendezvous_message(late, never_started, waiting, now - started)
        return Alert("rendezvous_late", tuple(late), message, self.last_lines(late))

    def _silence(self, state: RunState, now: float) -> Alert | None:
        paths = [p for _, _, p in self.record.rank_logs()] + [self.record.events_path]
        mtimes = [_mtime(p) for p in paths]
        latest = max([m for m in mtimes if m] + [self._last_event, state.started or now])
        if now - latest < self.silent_after:
            return None
        ranks = sorted({r for r, _, _ in self.record.rank_logs()})
        return Alert("possibly_hung", tuple(ranks),
                     _("possibly hung: no output and no event from any rank for {seconds:.0f} s").format(
                         seconds=now - latest),
                     self.last_lines(ranks))

    def _stragglers(self, now: float) -> list[Alert]:
        recent = [item for items in self._steps.values() for item in items]
        alerts = [Alert("straggler", (rank,), _("rank {rank} is a straggler: {evidence}").format(
                      rank=rank, evidence=said_again(fields["evidence_text"])))
                  for _kind, rank, fields, _lines in stragglers(recent) if rank is not None]
        last = {rank: items[-1] for rank, items in self._steps.items() if items}
        if len(last) < 2:
            return alerts
        lead = max(e.step for e in last.values())
        for rank, event in sorted(last.items()):
            if lead - event.step < STEP_LAG or any(rank in a.ranks for a in alerts):
                continue
            if event.origin != "hook":
                behind = _("rank {rank} is {steps} steps behind the fastest rank").format(rank=rank,
                                                                                       steps=lead - event.step)
                alerts.append(Alert("straggler", (rank,), behind))
                continue
            quiet = self._hook_quiet_limit()
            going = [e for e in last.values() if e.step - event.step >= STEP_LAG and now - e.t < quiet]
            if now - event.t >= quiet and going:
                ahead = max(going, key=lambda e: (e.step, -e.rank))
                alerts.append(Alert("straggler", (rank,), _(
                    "rank {rank} has logged no step for {seconds:.0f} s (its last logged step is {step}) while "
                    "rank {other} went on to step {other_step}: it stopped stepping, or steps far slower").format(
                        rank=rank, seconds=now - event.t, step=event.step, other=ahead.rank, other_step=ahead.step),
                    self.last_lines([rank])))
        return alerts

    def _hook_quiet_limit(self) -> float:
        """How long a hook-measured rank may go without a step event before it is called stopped."""
        gaps = [b.t - a.t for items in self._steps.values() for a, b in zip(items, list(items)[1:]) if b.t > a.t]
        return max(HOOK_QUIET_S, HOOK_QUIET_FACTOR * statistics.median(gaps)) if gaps else HOOK_QUIET_S

    def last_lines(self, ranks: list[int], count: int = 3) -> dict[int, list[str]]:
        out: dict[int, list[str]] = {}
        for rank in ranks:
            lines: list[str] = []
            for stream in ("stdout", "stderr"):
                lines += tail_lines(self.record.rank_log(rank, stream), count)
            out[rank] = lines[-2 * count:]
        return out


def _at_store(pid: Any) -> bool:
    """Whether the rank process holds a TCP connection to its MASTER_PORT (the rendezvous store)."""
    if not isinstance(pid, int):
        return False
    try:
        proc = psutil.Process(pid)
        port = int(proc.environ().get("MASTER_PORT", "0"))
        return any(c.raddr and c.raddr.port == port for c in proc.net_connections(kind="tcp"))
    except (psutil.Error, ValueError, OSError):
        return False


def _mtime(path: Path) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0


def tail_lines(path: Path, count: int, read: int = 8192) -> list[str]:
    """The last `count` lines of a file that are not blank, from its last `read` bytes."""
    try:
        with open_regular(path) as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - read))
            data = handle.read()
    except OSError:
        return []
    lines = [line for line in data.decode("utf-8", "replace").replace("\r", "\n").split("\n") if line.strip()]
    return lines[-count:]
