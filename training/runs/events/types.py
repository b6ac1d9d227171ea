"""What each event type carries: one frozen dataclass per type, which is also its schema.

A field without a default must be present; every field present must have its declared type, by the
one decoder's rules (training/foundation/json_decode.py: `int` never accepts a bool, `float` accepts an
int, a number within its `Bounds`). Fields a type does not name are kept in
`extra`, so a worker may add fields without breaking readers. The all-reduce bench's rows arrive
as `step` events with `kind: "allreduce"` (and its summary as such a `result`): same types on
disk, their own schema here.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import Enum
from typing import Annotated, Any, ClassVar

from mgtutor.training.foundation.json_decode import Bounds


class EventType(str, Enum):
    START = "start"
    RENDEZVOUS = "rendezvous"
    STEP = "step"
    EPOCH = "epoch"
    CHECKPOINT = "checkpoint"
    RESULT = "result"
    ERROR = "error"


@dataclass(frozen=True, kw_only=True)
class Event:
    rank: Annotated[int, Bounds(0, 1 << 20)]  # a global rank (records/types.py MAX_RANKS)
    t: float
    line: int = 0  # 1-based line number in events.jsonl (0: not read from a file)
    extra: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    source: str = field(default="", compare=False, repr=False)  # the line as written, for evidence
    type: ClassVar[EventType]

    def to_json(self) -> dict[str, Any]:
        """The event as it is on disk (field order aside)."""
        out: dict[str, Any] = {"rank": self.rank, "t": self.t, "type": self.type.value}
        for name in self.__dataclass_fields__:
            if name not in ("rank", "t", "line", "extra", "source"):
                value = getattr(self, name)
                if value is not None:
                    out[name] = [v.to_json() for v in value] if isinstance(value, tuple) and value \
                        and hasattr(value[0], "to_json") else value
        out.update(self.extra)
        return out

    def text(self, limit: int = 400) -> str:
        """One line for evidence: the event in the compact form the writer uses."""
        return (self.source or json.dumps(self.to_json(), separators=(",", ":")))[:limit]


@dataclass(frozen=True, kw_only=True)
class StartEvent(Event):
    """A rank's process is up (before init_process_group)."""
    type: ClassVar[EventType] = EventType.START
    pid: int | None = None
    host: str | None = None
    local_rank: int | None = None
    world_size: int | None = None
    backend: str | None = None
    device: str | None = None
    role: str | None = None  # "allreduce" for the bench


@dataclass(frozen=True, kw_only=True)
class RendezvousEvent(Event):
    """init_process_group returned (trainer), or one phase of the rendezvous probe (`phase`)."""
    type: ClassVar[EventType] = EventType.RENDEZVOUS
    waited_s: float | None = None
    world_size: int | None = None
    phase: str | None = None  # probe: skipped | arrived | timeout | init | barrier | allreduce
    missing: list[int] | None = None
    value: float | None = None
    expected: float | None = None


@dataclass(frozen=True, kw_only=True)
class StepEvent(Event):
    """The trainer's progress every `log_every` steps, or a user script's from the ranks' hook
    (training/worker/rank_hook.py, `origin: "hook"`; the trainer's events have no origin)."""
    type: ClassVar[EventType] = EventType.STEP
    step: int
    epoch: int | None = None
    loss: float | str | None = None
    samples_per_s: float | None = None
    data_wait_s: float | None = None
    compute_s: float | None = None
    mem_alloc_mib: float | None = None
    mem_peak_mib: float | None = None
    lr: float | None = None
    step_s: float | None = None  # one step's time, data wait included (the hook's; the trainer's is the sum)
    origin: str | None = None  # who measured it: "hook" (a user's script), None (mgtutor's own worker)

    def step_time(self) -> float | None:
        """One step's time: the hook's `step_s`, else the trainer's compute + data wait (None if it has neither)."""
        if self.step_s is not None:
            return self.step_s
        if self.compute_s is None and self.data_wait_s is None:
            return None
        return (self.compute_s or 0.0) + (self.data_wait_s or 0.0)


@dataclass(frozen=True, kw_only=True)
class EpochEvent(Event):
    type: ClassVar[EventType] = EventType.EPOCH
    epoch: int
    steps: int | None = None
    loss: float | str | None = None
    seconds: float | None = None


@dataclass(frozen=True, kw_only=True)
class CheckpointEvent(Event):
    type: ClassVar[EventType] = EventType.CHECKPOINT
    action: str  # saved | resumed
    step: int | None = None
    path: str | None = None
    seconds: float | None = None


@dataclass(frozen=True, kw_only=True)
class ResultEvent(Event):
    """The trainer's per-rank result (its summary table row)."""
    type: ClassVar[EventType] = EventType.RESULT
    steps: int | None = None
    final_loss: float | str | None = None
    samples_per_s: float | None = None
    step_s: float | None = None
    data_wait_s: float | None = None
    compute_s: float | None = None
    mem_peak_mib: float | None = None
    world_size: int | None = None
    params_sha256: str | None = None


@dataclass(frozen=True, kw_only=True)
class ErrorEvent(Event):
    """A rank caught an exception (trainer: `error`; probe: `phase` and `message`)."""
    type: ClassVar[EventType] = EventType.ERROR
    error: str | None = None
    message: str | None = None
    exception: str | None = None
    phase: str | None = None
    step: int | None = None

    @property
    def description(self) -> str:
        return str(self.message or self.error or "error")


@dataclass(frozen=True)
class AllReduceRow:
    """One timed all-reduce (one size, out-of-place or in-place), as nccl-tests prints it."""
    bytes: int
    count: int
    dtype: str
    time_us: float
    algbw_gbps: float
    busbw_gbps: float
    wrong: int | None = None
    in_place: bool = False
    graph: bool = False
    method: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"bytes": self.bytes, "count": self.count, "dtype": self.dtype, "time_us": self.time_us,
                "algbw_gbps": self.algbw_gbps, "busbw_gbps": self.busbw_gbps, "wrong": self.wrong,
                "in_place": self.in_place, "graph": self.graph, "method": self.method}


@dataclass(frozen=True, kw_only=True)
class BenchRowsEvent(Event):
    """The all-reduce bench's rows of one size: a `step` event with `kind: "allreduce"`."""
    type: ClassVar[EventType] = EventType.STEP
    kind: str
    size: int
    rows: tuple[AllReduceRow, ...]


@dataclass(frozen=True, kw_only=True)
class BenchResultEvent(Event):
    """The all-reduce bench's summary: a `result` event with `kind: "allreduce"`."""
    type: ClassVar[EventType] = EventType.RESULT
    kind: str
    backend: str | None = None
    world_size: int | None = None
    device: str | None = None
    graph: bool | None = None
    oop_method: str | None = None


@dataclass(frozen=True, kw_only=True)
class BatchTrialEvent(Event):
    """One agreed trial of the batch finder: a `step` event with `kind: "maxbatch"` (rank 0 writes it)."""
    type: ClassVar[EventType] = EventType.STEP
    kind: str
    batch: int
    fits: bool
    peak_bytes: int
    seconds: float
    phase: str  # fit | confirm | prove


@dataclass(frozen=True, kw_only=True)
class BatchResultEvent(Event):
    """The batch finder's answer: a `result` event with `kind: "maxbatch"`; the trials are in `extra`."""
    type: ClassVar[EventType] = EventType.RESULT
    kind: str
    chosen_batch: int
    measured_max: int
    predicted: int
    fixed_bytes: int
    per_sample_bytes: int
    budget_bytes: int
    margin_pct: float
    seconds: float
    world_size: int | None = None
    proved_steps: int | None = None
    proved: bool | None = None


@dataclass(frozen=True, kw_only=True)
class CompileEvent(Event):
    """A rank's compiled step: a `step` event with `kind: "compile"`; `began` is on disk before the
    compiler runs, so a rank that dies inside it leaves a `began` with no `compiled` or `fell_back`."""
    type: ClassVar[EventType] = EventType.STEP
    kind: str
    phase: str  # began | compiled | fell_back
    plan: str
    seconds: float | None = None
    reason: str | None = None


BY_TYPE: dict[EventType, type[Event]] = {cls.type: cls for cls in (
    StartEvent, RendezvousEvent, StepEvent, EpochEvent, CheckpointEvent, ResultEvent, ErrorEvent)}
BY_KIND: dict[tuple[EventType, str], type[Event]] = {
    (EventType.STEP, "allreduce"): BenchRowsEvent, (EventType.RESULT, "allreduce"): BenchResultEvent,
    (EventType.STEP, "maxbatch"): BatchTrialEvent, (EventType.RESULT, "maxbatch"): BatchResultEvent,
    (EventType.STEP, "compile"): CompileEvent}
