"""An OOM's batch that fits, from what the run measured before it: the ranks' hook's `step` events carry
each logged step's per-rank batch and the allocator's peak (training/worker/rank_hook.py), and the OOM's
message says how much PyTorch could have held. Steps at two batch sizes or more pin the straight line
peak = fixed + per_sample × batch (training/runs/batchfit.py, the batch finders' arithmetic), and the line
gives the largest batch under that memory. One batch size pins no line: a cut in the batch cuts only the
memory that grows with it, and how much that is stays unknown, so no number is offered; the command that
measures it is (`mgtutor fit`).

The hook's peak is the process's peak so far, never reset: a step at a smaller batch after a larger one
still shows the larger one's peak. Only steps at a batch larger than every step before them count.
"""
from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from typing import Any

from mgtutor.training.runs.batchfit import DEFAULT_MARGIN, Line, fit_line
from mgtutor.training.runs.events.reader import read_events
from mgtutor.training.runs.events.types import StepEvent

_MIB = 1 << 20


@dataclass(frozen=True)
class MeasuredBatch:
    batch: int  # the largest per-GPU batch the line puts under the memory PyTorch could hold, less the margin
    line: Line
    budget_bytes: int
    points: tuple[tuple[int, int], ...]  # (batch, peak bytes) of the steps that count

    def to_json(self) -> dict[str, Any]:
        return {"batch": self.batch, "fixed_bytes": int(self.line.fixed_bytes),
                "per_sample_bytes": int(self.line.per_sample_bytes), "budget_bytes": self.budget_bytes,
                "points": [list(p) for p in self.points]}


def step_points(events: list[Any], rank: int | None) -> list[tuple[int, int]]:
    """(batch, peak bytes) of the rank's logged steps, each at a batch larger than every one before it."""
    points: list[tuple[int, int]] = []
    for event in events:
        if not isinstance(event, StepEvent) or (rank is not None and event.rank != rank):
            continue
        batch, peak = event.extra.get("batch"), event.mem_peak_mib
        if isinstance(batch, int) and batch > 0 and isinstance(peak, (int, float)) and peak > 0 \
                and batch > max((b for b, _p in points), default=0):
            points.append((batch, int(peak * _MIB)))
    return points


def measured_batch(points: list[tuple[int, int]], budget_bytes: int | None,
                   margin: float = DEFAULT_MARGIN) -> MeasuredBatch | None:
    """The batch that fits, or None where the run did not measure enough (fewer than two batch sizes)."""
    if budget_bytes is None or len({b for b, _p in points}) < 2:
        return None
    line = fit_line(points)
    batch = line.batch_for(budget_bytes * (1 - margin))
    if line.per_sample_bytes <= 0 or batch < 1:
        return None
    return MeasuredBatch(batch, line, budget_bytes, tuple(points))


def run_points(record: Any, rank: int | None, max_lines: int = 20_000) -> list[tuple[int, int]]:
    try:
        return step_points(list(read_events(record.events_path, max_lines)), rank)
    except (OSError, AttributeError):
        return []


def fit_command(record: Any) -> str | None:
    """`mgtutor fit` for the run's own command: the one command that finds the batch (None: none recorded)."""
    try:
        meta = record.meta()
    except (OSError, ValueError, AttributeError):
        return None
    target = list(meta.target or [])
    if not target:
        return None
    if target[0] != "-m" and meta.cwd and os.path.isabs(target[0]) and target[0].startswith(meta.cwd.rstrip("/") + "/"):
        target[0] = os.path.relpath(target[0], meta.cwd)  # as the user would type it, from where the run started
    nproc = meta.nproc_per_node or meta.world_size
    return shlex.join(["mgtutor", "fit", *(["--nproc", str(nproc)] if nproc else []), "--", *target])
