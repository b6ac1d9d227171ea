"""The batch finders' arithmetic, without torch: fit the memory line, pick the next trial, split a global batch.

Shared by the trainer's finder inside the ranks (training/worker/batch/batchfind.py) and `mgtutor fit` in the parent
(diagnostics/bench/scriptfit.py), which is why it sits in the torch-free run layer and not among the workers.

A training step's peak memory grows in a straight line with the batch: `peak = fixed + per_sample × B`,
where `fixed` is weights, gradients and optimizer state (and the allocator's own slack) and
`per_sample` is one sample's activations plus its input. Two or three small trials pin the line,
the line predicts the largest batch, and a few trials next to the prediction confirm it — instead
of halving from a guess, which wastes trials far from the limit and can stop 1/3 below it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

# `mgtutor fit`'s trials (diagnostics/bench/scriptfit.py starts them, training/worker/batch/fit_trial.py ends them)
STOP_ENV = "MGTUTOR_STOP_AFTER_STEPS"  # K: the ranks' hook ends the script after its K-th optimizer step
TRIAL_BATCH_ENV = "MGTUTOR_TRIAL_BATCH"  # the batch the trial gave the script (reported where no DataLoader shows it)
ROUND_TO = 8  # the chosen batch is a multiple of 8: what tensor cores like, and easy to read
DEFAULT_MARGIN = 0.05  # of the memory the rank can use: fragmentation, NCCL's buffers, DDP's buckets
CONFIRM_STEP = 0.01  # confirm trials walk 1 % steps near the prediction, then bisect
PRECISION = 0.01  # stop when a fitting and a failing batch are within 1 % of each other


@dataclass(frozen=True)
class Trial:
    """One agreed trial: the batch, whether it fit on every rank, the largest peak over ranks."""
    batch: int
    fits: bool
    peak_bytes: int
    seconds: float
    phase: str  # fit | confirm

    def to_json(self) -> dict[str, object]:
        return {"batch": self.batch, "fits": self.fits, "peak_bytes": self.peak_bytes,
                "seconds": round(self.seconds, 3), "phase": self.phase}


@dataclass(frozen=True)
class Line:
    fixed_bytes: float
    per_sample_bytes: float

    def batch_for(self, budget_bytes: float) -> int:
        """The largest batch whose predicted peak stays within `budget_bytes` (0 if none)."""
        if self.per_sample_bytes <= 0:
            return 0
        return max(0, int((budget_bytes - self.fixed_bytes) // self.per_sample_bytes))


def fit_line(points: list[tuple[int, int]]) -> Line:
    """Least squares through (batch, peak bytes); a single point gives no slope, so it needs two."""
    if len({b for b, _ in points}) < 2:
        raise ValueError("fitting the memory line needs trials at two different batch sizes")
    n = len(points)
    mean_b = sum(b for b, _ in points) / n
    mean_p = sum(p for _, p in points) / n
    var = sum((b - mean_b) ** 2 for b, _ in points)
    slope = sum((b - mean_b) * (p - mean_p) for b, p in points) / var
    return Line(fixed_bytes=mean_p - slope * mean_b, per_sample_bytes=slope)


# The small trial of the first line. Each trial at a new batch costs seconds of cuDNN planning on some
# models (ConvNeXt: 3–5 s), so the first line is drawn from the fixed part the model already shows
# (weights, and as much again for gradients and for momentum) to one trial at this batch; the far
# trial that follows sets the slope.
SMALL_BATCH = 32


class Confirm:
    """Walk from the prediction to the edge: up by 2 %, 4 %, 8 %… while it fits, down the same way
    when it does not, then bisect between the largest fit and the smallest failure. `floor_fit`
    (the largest fit trial) bounds the walk down; it does not count as bracketing the edge. `cap` (an
    epoch's samples, `--max-batch`) bounds the walk up and is no failure: a fit at the cap is the answer."""

    def __init__(self, predicted: int, cap: int | None = None, floor_fit: int = 0, precision: float = PRECISION) -> None:
        self.cap = cap
        self.precision = precision  # done when a fit and a failure are this close (a fraction of the fit)
        self.best_fit = floor_fit  # largest batch known to fit
        self.first_fail: int | None = None  # smallest batch known to fail
        self.predicted = max(1, min(predicted, cap) if cap else predicted)
        self.stride = CONFIRM_STEP
        self.tried: set[int] = set()
        self.fit_here = False  # a confirm trial fitted: the edge is bracketed near the prediction
        self.target: int | None = None  # a better prediction to try next (aim)

    def aim(self, batch: int) -> None:
        """Try `batch` next (a prediction from a line refitted near the edge), then walk from there."""
        limit = self.first_fail - 1 if self.first_fail is not None else (self.cap or batch)
        self.target = min(batch, limit) if min(batch, limit) not in self.tried else None
        self.stride = CONFIRM_STEP

    def record(self, batch: int, fits: bool) -> None:
        self.tried.add(batch)
        if fits:
            self.best_fit = max(self.best_fit, batch)
            self.fit_here = True
        elif self.first_fail is None or batch < self.first_fail:
            self.first_fail = batch

    def done(self) -> bool:
        if self.cap and self.best_fit >= self.cap:
            return True
        if self.first_fail is None or self.best_fit == 0:
            return False
        return self.first_fail - self.best_fit <= max(1, math.floor(self.best_fit * self.precision))

    def next_batch(self) -> int | None:
        if self.done():
            return None
        if not self.tried:
            return self.predicted
        if self.target is not None and self.target > self.best_fit:
            target, self.target = self.target, None
            return target
        bisect = (self.best_fit + self.first_fail) // 2 if self.first_fail is not None else None
        if bisect is not None and self.fit_here:
            return bisect
        self.stride *= 2
        if self.first_fail is None:  # everything fit so far: step up, never past the cap
            up = max(self.best_fit + 1, math.ceil(self.best_fit * (1 + self.stride)))
            return min(up, self.cap) if self.cap else up
        down = math.floor(self.first_fail * (1 - self.stride))
        return down if down > self.best_fit else bisect


class Bisect:
    """Plain bisection between a fitting and a failing batch (the ground truth, and the fallback)."""

    def __init__(self, low_fit: int, high_fail: int) -> None:
        self.best_fit, self.first_fail = low_fit, high_fail

    def record(self, batch: int, fits: bool) -> None:
        if fits:
            self.best_fit = max(self.best_fit, batch)
        else:
            self.first_fail = min(self.first_fail, batch)

    def next_batch(self) -> int | None:
        if self.first_fail - self.best_fit <= 1:
            return None
        return (self.best_fit + self.first_fail) // 2


def chosen_batch(measured_max: int, line: Line, budget_bytes: float, margin: float = DEFAULT_MARGIN) -> int:
    """The measured maximum less `margin` × the rank's memory budget, rounded down to a multiple of 8."""
    spare = math.ceil(margin * budget_bytes / line.per_sample_bytes) if line.per_sample_bytes > 0 else 0
    batch = max(1, measured_max - spare)
    return batch - batch % ROUND_TO if batch >= 2 * ROUND_TO else batch


@dataclass(frozen=True)
class Split:
    per_rank: int
    accumulation: int
    world_size: int

    @property
    def global_batch(self) -> int:
        return self.per_rank * self.accumulation * self.world_size

    def to_json(self) -> dict[str, int]:
        return {"per_rank": self.per_rank, "accumulation": self.accumulation, "world_size": self.world_size,
                "global_batch": self.global_batch}


def split_global(target: int, world_size: int, max_per_rank: int) -> Split:
    """Per-rank batch × gradient accumulation × ranks = `target`, with the fewest accumulation steps;
    when no exact split fits under `max_per_rank`, the largest global batch below the target with that
    fewest accumulation (1000 on 3 ranks of at most 200: 166 × 2 × 3 = 996)."""
    if target < 1 or world_size < 1 or max_per_rank < 1:
        raise ValueError("the global batch, the ranks and the largest per-rank batch must be at least 1")
    per_rank_total = target // world_size
    start = max(1, math.ceil(target / (world_size * max_per_rank)))
    for accum in range(start, per_rank_total + 1):
        if target % (world_size * accum) == 0 and target // (world_size * accum) <= max_per_rank:
            return Split(target // (world_size * accum), accum, world_size)
    return Split(max(1, min(max_per_rank, per_rank_total // start)), start, world_size)
