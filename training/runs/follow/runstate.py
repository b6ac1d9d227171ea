"""Fold a run directory into what a monitor shows: phase, per-rank progress, series, failure.

    folder = RunStateFolder(record)         # keep one per run
    state = folder.refresh(events=new)      # cheap; call it a few times a second with the new events
                                            # (RunSession's reader), or without: it reads its own

Phases: starting (no rank up yet) → rendezvous (ranks up, waiting in init_process_group) →
training (steps arrive, or every rank joined) → finished | failed | stopped | lost. A script that
emits no events goes starting → running → its end. Headless: the TUI and tests share it.
"""
from __future__ import annotations

import math
import statistics
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from mgtutor.training.foundation.i18n import N_, _, ngettext
from mgtutor.training.runs.events.reader import EventReader
from mgtutor.training.runs.events.types import (
    BatchResultEvent,
    BatchTrialEvent,
    ErrorEvent,
    Event,
    RendezvousEvent,
    StartEvent,
    StepEvent,
)
from mgtutor.training.runs.records.record import RankExit, RunMeta, RunRecord, RunResult, RunStatus

SERIES_POINTS = 600  # per rank; the charts show the last few hundred steps
STRAGGLER_RATIO = 0.8  # a rank below 80% of the others' median throughput is pointed out
TERMINAL = tuple(s.value for s in RunStatus if s.terminal)
_SIGNAL_MEANING = {
    "SIGKILL": N_("likely the host OOM killer (or someone ran kill -9)"),
    "SIGSEGV": N_("a segmentation fault in native code"),
    "SIGABRT": N_("an abort in native code (a C++ exception, NCCL or CUDA error)"),
    "SIGTERM": N_("someone or something asked it to stop"),
    "SIGBUS": N_("a bus error: often /dev/shm too small for the data loader"),
}


@dataclass
class RankState:
    rank: int
    pid: int | None = None
    started: float | None = None  # the rank's process is up (start event or rank record)
    joined: float | None = None  # init_process_group returned (rendezvous event)
    ended: float | None = None
    exit_code: int | None = None
    signal: str | None = None
    last_step: int | None = None
    loss: deque[tuple[int, float]] = field(default_factory=lambda: deque(maxlen=SERIES_POINTS))
    throughput: deque[tuple[int, float]] = field(default_factory=lambda: deque(maxlen=SERIES_POINTS))
    error: str | None = None
    straggler: bool = False

    def snapshot(self) -> RankState:
        """A copy another thread may keep (the series hold immutable tuples: copying the deques is enough)."""
        return replace(self, loss=self.loss.copy(), throughput=self.throughput.copy())

    def waited(self, now: float) -> float | None:
        """Seconds spent waiting for the rendezvous so far (None before the rank is up)."""
        if self.started is None:
            return None
        return max(0.0, (self.joined or now) - self.started)


@dataclass(frozen=True)
class BatchSearch:
    """The batch finder so far (its trials come before any training step): the last trial, and its answer."""
    trials: int = 0
    batch: int | None = None  # the last trial's batch
    fits: bool | None = None
    chosen: int | None = None  # the finder's answer (its result event)


@dataclass
class RunState:
    run_id: str
    phase: str = "starting"
    world_size: int = 0
    backend: str = "?"
    label: str = ""
    started: float | None = None
    ended: float | None = None
    has_events: bool = False
    ranks: dict[int, RankState] = field(default_factory=dict)
    total_throughput: deque[tuple[int, float]] = field(default_factory=lambda: deque(maxlen=SERIES_POINTS))
    result: RunResult | None = None
    phases_seen: list[str] = field(default_factory=list)
    batch_search: BatchSearch | None = None  # a run that searched for its batch size (--batch-size auto, maxbatch)

    def snapshot(self) -> RunState:
        """A copy the folder will not change: what a session hands to a view (another thread). Much
        cheaper than deepcopy, which walked every point of every series four times a second."""
        return replace(self, ranks={r: s.snapshot() for r, s in self.ranks.items()},
                       total_throughput=self.total_throughput.copy(), phases_seen=list(self.phases_seen))

    @property
    def done(self) -> bool:
        return self.phase in TERMINAL

    def elapsed(self, now: float | None = None) -> float:
        if self.started is None:
            return 0.0
        end = self.ended if self.done and self.ended else (now if now is not None else time.time())
        return max(0.0, end - self.started)

    def stragglers(self) -> list[int]:
        return [r for r, s in sorted(self.ranks.items()) if s.straggler]

    def pids(self) -> dict[int, int]:
        """pid → rank for every rank whose process is known."""
        return {s.pid: r for r, s in self.ranks.items() if s.pid}


class RunStateFolder:
    """Reads a run directory into a RunState; only new bytes of events.jsonl are read each time."""

    def __init__(self, record: RunRecord, alive: Callable[[], bool] | None = None) -> None:
        self.record = record
        self.alive = alive  # how to tell the run is still going (default: the record's status)
        self.state = RunState(run_id=record.run_id)
        self._reader: EventReader | None = None  # only when no session feeds the events
        self._pending_totals: dict[int, dict[int, float]] = {}
        self._first_look = math.inf  # when this folder first looked: what happened after, it watched

    def rank(self, rank: int) -> RankState:
        if rank not in self.state.ranks:
            self.state.ranks[rank] = RankState(rank)
        return self.state.ranks[rank]

    def refresh(self, now: float | None = None, events: list[Event] | None = None) -> RunState:
        now = time.time() if now is None else now
        self._first_look = min(self._first_look, now)
        if events is None:
            self._reader = self._reader or EventReader(self.record.events_path)
            events = self._reader.poll()
        state = self.state
        meta = self.record.meta()
        state.world_size = meta.world_size or state.world_size
        state.backend = meta.backend or state.backend
        state.label = meta.label or state.label
        state.started = meta.started or state.started
        for r in range(state.world_size):
            self.rank(r)
        for event in events:
            self.apply(event)
        for info in self.record.ranks():
            self._apply_rank_record(info)
        result = self.record.settled_result()  # a stop under way has yet to add its report
        if result is None and not self._alive():
            result = self.record.settled_result()  # it may have been written just before exiting
        self._set_phase(result, meta, now)
        self._mark_stragglers()
        return state

    def _alive(self) -> bool:
        if self.alive is not None:
            return self.alive()
        return self.record.status() == RunStatus.RUNNING

    def apply(self, event: Event) -> None:
        """Fold one event (public so tests and replays can feed events directly)."""
        rank = self.rank(event.rank)
        self.state.has_events = True
        if isinstance(event, StartEvent):
            rank.started = rank.started or event.t
            rank.pid = rank.pid or event.pid
        elif isinstance(event, RendezvousEvent):
            rank.started = rank.started or event.t
            rank.joined = rank.joined or event.t
        elif isinstance(event, StepEvent):
            self._apply_step(rank, event)
        elif isinstance(event, ErrorEvent):
            rank.error = rank.error or event.description
        elif isinstance(event, (BatchTrialEvent, BatchResultEvent)):
            self._apply_batch_search(event)

    def _apply_batch_search(self, event: BatchTrialEvent | BatchResultEvent) -> None:
        search = self.state.batch_search or BatchSearch()
        if isinstance(event, BatchTrialEvent):
            search = replace(search, trials=search.trials + 1, batch=event.batch, fits=event.fits)
        else:
            search = replace(search, chosen=event.chosen_batch)
        self.state.batch_search = search

    def _apply_step(self, rank: RankState, event: StepEvent) -> None:
        step = event.step
        rank.last_step = step
        if rank.joined is None:
            rank.joined = event.t
        loss = _number(event.loss)
        if loss is not None:
            rank.loss.append((step, loss))
        speed = _number(event.samples_per_s)
        if speed is None:
            return
        rank.throughput.append((step, speed))
        pending = self._pending_totals.setdefault(step, {})
        pending[rank.rank] = speed
        if len(pending) >= max(1, self.state.world_size):
            self.state.total_throughput.append((step, sum(pending.values())))
            for old in [s for s in self._pending_totals if s <= step]:
                del self._pending_totals[old]
        elif len(self._pending_totals) > 64:  # a rank that stopped reporting must not grow this
            del self._pending_totals[min(self._pending_totals)]

    def _apply_rank_record(self, info: RankExit) -> None:
        rank = self.rank(info.rank)
        rank.pid = info.pid or rank.pid
        rank.started = rank.started or info.started
        rank.ended = info.ended
        rank.exit_code = info.exit_code
        rank.signal = info.signal

    def _set_phase(self, result: RunResult | None, meta: RunMeta, now: float) -> None:
        state = self.state
        ranks = [state.ranks[r] for r in sorted(state.ranks)]
        if result is not None:
            state.result = result
            phase = result.status.value
            state.ended = meta.ended or (state.started + result.duration_s
                                         if state.started and result.duration_s else now)
        elif not self._alive():
            phase = "lost"
            state.ended = max((r.ended or 0 for r in ranks), default=0) or now
        elif not any(r.started for r in ranks):
            phase = "starting"
        elif any(r.last_step is not None for r in ranks) or (ranks and all(r.joined for r in ranks)):
            phase = "training"
        elif state.has_events:
            phase = "rendezvous"
        elif meta.speaks_events():
            phase = "starting"  # our worker is importing torch; its start event is on the way
        else:
            phase = RunStatus.RUNNING.value
        state.phase = phase
        if (phase == "training" and "rendezvous" not in state.phases_seen
                and any(r.joined and r.joined > self._first_look for r in ranks)):
            state.phases_seen.append("rendezvous")  # it ended, while watched, between two looks
        if not state.phases_seen or state.phases_seen[-1] != phase:
            state.phases_seen.append(phase)

    def _mark_stragglers(self) -> None:
        recent = {r: statistics.median(v for _, v in list(s.throughput)[-10:])
                  for r, s in self.state.ranks.items() if len(s.throughput) >= 3}
        for rank_state in self.state.ranks.values():
            rank_state.straggler = False
        if len(recent) < 2 or self.state.done:
            return
        for rank, speed in recent.items():
            others = statistics.median(v for r, v in recent.items() if r != rank)
            self.state.ranks[rank].straggler = others > 0 and speed < STRAGGLER_RATIO * others


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    try:
        return float(value)  # "nan" arrives as a string (JSON has no NaN)
    except (TypeError, ValueError, OverflowError):  # OverflowError: a whole number beyond a float
        return None


def describe_failure(state: RunState) -> str | None:
    """One sentence from the record, in the language in force: who failed first and how. None when
    nothing failed."""
    result = state.result or RunResult()
    if state.phase == RunStatus.LOST:
        return _("the run ended without a result: its supervisor is gone (the machine rebooted, or it "
                 "was killed); the rank records below say what is known")
    if state.phase != RunStatus.FAILED:
        return None
    first = result.first_failure
    if not first:
        code = result.torchrun_exit_code
        return (_("torchrun exited with code {code} before any rank reported a failure").format(code=code) if code
                else _("the run failed"))
    rank = first.rank
    if first.signal:
        sig = first.signal
        meaning = _SIGNAL_MEANING.get(sig)
        text = _("rank {rank} was killed by {signal}").format(rank=rank, signal=sig) + \
            (f" — {_(meaning)}" if meaning else "")
    else:
        text = _("rank {rank} failed first: exit code {code}").format(rank=rank, code=first.exit_code)
    error = state.ranks[rank].error if rank in state.ranks else None
    if error:
        text += f" ({error[:120]})"  # the rank's own words
    others = [e.rank for e in result.ranks if e.outcome == "stopped after the first failure"]
    if others:
        text += ngettext("; torchrun then stopped rank {ranks}", "; torchrun then stopped ranks {ranks}",
                         len(others)).format(ranks=", ".join(map(str, others)))
    return text
