"""Fold a trainer run's events into one row per rank and the totals of a summary table; and any run's
last logged step per rank (the trainer's or a user's script's, measured by the ranks' hook).

Used after a run by `mgtutor train` (its table), `mgtutor bench scaling` (a point's throughput) and
`mgtutor runs show` (each rank's last step).
"""
from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field

from mgtutor.training.foundation.safe_io import open_regular
from mgtutor.training.runs.events.reader import EventReader
from mgtutor.training.runs.events.types import ErrorEvent, Event, ResultEvent, StepEvent

TAIL_BYTES = 16 << 20  # last_steps reads at most this much of the end of events.jsonl (about 60,000 events)


@dataclass
class RankSummary:
    rank: int
    step: int | None = None
    loss: float | str | None = None
    result: bool = False  # the rank sent its result event
    samples_per_s: float | None = None
    mem_peak_mib: float | None = None
    data_wait_s: float | None = None
    compute_s: float | None = None
    step_s: float | None = None
    error: str | None = None


@dataclass
class TrainSummary:
    ranks: list[RankSummary] = field(default_factory=list)

    @property
    def done(self) -> list[RankSummary]:
        return [r for r in self.ranks if r.result]

    @property
    def complete(self) -> bool:
        return bool(self.ranks) and len(self.done) == len(self.ranks)

    @property
    def samples_per_s(self) -> float | None:
        """Every rank's own throughput summed; None unless every rank reported its result."""
        return sum(r.samples_per_s or 0.0 for r in self.done) if self.complete else None

    def mean(self, name: str) -> float | None:
        values = [v for r in self.done if isinstance(v := getattr(r, name), (int, float))]
        return sum(values) / len(values) if values else None


def summarize(events: Iterable[Event], world_size: int) -> TrainSummary:
    """Per-rank rows (result or error, last step) for ranks 0..world_size-1 and any rank that spoke."""
    rows: dict[int, RankSummary] = {r: RankSummary(r) for r in range(world_size)}
    for event in events:
        row = rows.setdefault(event.rank, RankSummary(event.rank))
        if isinstance(event, StepEvent):
            row.step, row.loss = event.step, event.loss
        elif isinstance(event, ResultEvent):
            row.result, row.step, row.loss = True, event.steps, event.final_loss
            row.samples_per_s, row.mem_peak_mib = event.samples_per_s, event.mem_peak_mib
            row.data_wait_s, row.compute_s, row.step_s = event.data_wait_s, event.compute_s, event.step_s
        elif isinstance(event, ErrorEvent):
            row.error = event.error
    return TrainSummary([rows[r] for r in sorted(rows)])


def last_steps(path: str | os.PathLike[str], tail: int = TAIL_BYTES) -> tuple[dict[int, StepEvent], bool]:
    """Each rank's last `step` event, from the last `tail` bytes of events.jsonl (a day-long run's file
    is not read whole to say where it ended), and whether the file was longer than that (a rank that
    stopped logging long before the end may then have no row)."""
    try:
        with open_regular(path) as handle:
            size = handle.seek(0, os.SEEK_END)
            start = max(0, size - tail)
            if start:
                handle.seek(start - 1)
                handle.readline()  # to the start of the first whole line
                start = handle.tell()
    except OSError:
        return {}, False
    reader = EventReader(path)
    reader.offset = start
    last: dict[int, StepEvent] = {}
    while True:
        offset = reader.offset
        for event in reader.poll():
            if isinstance(event, StepEvent):
                last[event.rank] = event
        if reader.offset == offset:
            return last, start > 0
