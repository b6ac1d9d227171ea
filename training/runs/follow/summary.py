"""Fold a trainer run's events into one row per rank and the totals of a summary table.

Used after a run by `mgtutor train` (its table) and `mgtutor bench scaling` (a point's throughput).
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from mgtutor.training.runs.events.types import ErrorEvent, Event, ResultEvent, StepEvent


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
