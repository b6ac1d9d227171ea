"""The batch that fits a user's own script (`mgtutor fit`): which batch to try next, and the answer.

Each trial runs the whole script under torchrun at one batch until its K-th optimizer step
(diagnostics/bench/scripttrial.py), so a trial costs a process start, and the search spends few:
1. a small batch (8, or the script's own if smaller) measures every rank's peak;
2. a far one: the largest batch that the first peak proves (peak per sample at most peak/batch, so
   budget/peak × batch fits if memory is a straight line), less a tenth;
3. the line through the two (fixed + per-sample bytes: training/runs/batchfit.py, the built-in finder's
   arithmetic) predicts the largest batch under the smallest rank's budget; trials at the prediction
   and next to it confirm it (`Confirm`: up or down by 2 %, 4 %… then bisect) to within 2 %, and a fit
   far out refits the line through it (a secant step) when it predicts more than a step further.
A batch fits when every rank reached the K-th step; an OOM on any rank is "does not fit". A trial that
failed for another reason counts as not fitting; two such before anything fitted (the second at batch
1) mean the script fails whatever the batch, and the search ends with that error.
Headless and torch-free: the numbers come from the ranks' hook's events (training/worker/batch/fit_trial.py).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from mgtutor.diagnostics.check.script_options import ScriptOption, int_or_none, option_value, with_option
from mgtutor.training.runs.batchfit import CONFIRM_STEP, Confirm, Line, chosen_batch, fit_line, split_global

FIRST_BATCH = 8
PRECISION = 0.02  # a fitting and a failing batch this close end the search
MAX_TRIALS = 12
MAX_REFITS = 2
FAR_SHARE = 0.9  # of the batch the first trial proves: the far trial stays below the proven edge
DEFAULT_MARGIN_PCT = 5.0


@dataclass
class FitTrial:
    """One trial: the script at `batch` on every rank, until its K-th step, an OOM, or another failure."""
    batch: int
    phase: str  # fit | confirm
    fits: bool
    seconds: float = 0.0
    peaks: dict[int, int] = field(default_factory=dict)  # rank → peak bytes the GPU gave (the allocator's reserved)
    budgets: dict[int, int] = field(default_factory=dict)  # rank → bytes it could have had (free + its own)
    oom_ranks: list[int] = field(default_factory=list)
    error: str | None = None  # failed for another reason: what the ranks said
    run_id: str = ""

    @property
    def peak_bytes(self) -> int:
        return max(self.peaks.values(), default=0)

    @property
    def budget_bytes(self) -> int:
        return min(self.budgets.values(), default=0)

    def to_json(self) -> dict[str, Any]:
        return {"batch": self.batch, "phase": self.phase, "fits": self.fits, "seconds": round(self.seconds, 2),
                "peak_bytes": self.peak_bytes, "budget_bytes": self.budget_bytes,
                "peaks_bytes": {str(r): b for r, b in sorted(self.peaks.items())}, "oom_ranks": self.oom_ranks,
                "error": self.error, "run_id": self.run_id}


@dataclass
class FitAnswer:
    largest: int  # the largest batch that trained on every rank (0: none did)
    recommended: int  # that, less the margin, rounded down to a multiple of 8
    line: Line | None
    budget_bytes: int
    predictions: list[int]
    trials: list[FitTrial]
    margin_pct: float
    error: str | None = None  # the script failed whatever the batch

    def to_json(self) -> dict[str, Any]:
        return {"largest_batch": self.largest, "recommended_batch": self.recommended,
                "fixed_bytes": int(self.line.fixed_bytes) if self.line else None,
                "per_sample_bytes": int(self.line.per_sample_bytes) if self.line else None,
                "budget_bytes": self.budget_bytes, "predictions": self.predictions, "margin_pct": self.margin_pct,
                "error": self.error, "trials": [t.to_json() for t in self.trials],
                "seconds": round(sum(t.seconds for t in self.trials), 2)}


class FitSearch:
    """Which batch to try next, from the trials so far (no process here: `record` is fed each trial)."""

    def __init__(self, first: int = FIRST_BATCH, max_batch: int | None = None, precision: float = PRECISION,
                 max_trials: int = MAX_TRIALS) -> None:
        self.first = max(1, min(first, max_batch or first))
        self.max_batch, self.precision, self.max_trials = max_batch, precision, max_trials
        self.trials: list[FitTrial] = []
        self.points: list[tuple[int, int]] = []  # (batch, peak) of the trials that fitted
        self.budget = 0
        self.line: Line | None = None
        self.predictions: list[int] = []
        self.confirm: Confirm | None = None
        self.best_fit, self.first_fail = 0, (max_batch + 1 if max_batch else None)

    # ---- what to try --------------------------------------------------------------------------
    def next_batch(self) -> tuple[int, str] | None:
        if len(self.trials) >= self.max_trials or self.failed_whatever_the_batch():
            return None
        if self.confirm is not None:
            batch = self.confirm.next_batch()
            return None if batch is None else (batch, "confirm")
        if not self.trials:
            return self.first, "fit"
        if not self.points:  # nothing fitted yet: halve, down to 1
            last = self.trials[-1].batch
            return None if last <= 1 else (max(1, last // 2) if not self.trials[-1].error else 1, "fit")
        batch = self._second_point()
        return None if batch <= self.best_fit else (batch, "fit")

    def _second_point(self) -> int:
        if self.first_fail is not None and len(self.trials) > 1:  # the far one did not fit: halfway back
            return (self.best_fit + self.first_fail) // 2
        batch, peak = self.points[-1]
        proven = math.floor(batch * self.budget / peak) if peak else batch * 4
        far = max(batch + 1, math.floor(proven * FAR_SHARE))
        return min(far, self.first_fail - 1) if self.first_fail is not None else far

    def failed_whatever_the_batch(self) -> bool:
        return not self.points and sum(1 for t in self.trials if t.error) >= 2

    # ---- what a trial taught --------------------------------------------------------------------
    def record(self, trial: FitTrial) -> None:
        self.trials.append(trial)
        if trial.fits:
            self.best_fit = max(self.best_fit, trial.batch)
            self.budget = min(self.budget or trial.budget_bytes, trial.budget_bytes)
        elif self.first_fail is None or trial.batch < self.first_fail:
            self.first_fail = trial.batch
        if self.confirm is not None:
            self.confirm.record(trial.batch, trial.fits)
            if trial.fits and all(t.fits for t in self.trials if t.phase == "confirm"):
                self._refit((trial.batch, trial.peak_bytes))
            return
        if trial.fits:
            self.points.append((trial.batch, trial.peak_bytes))
        if len(self.points) >= 2:
            self._start_confirm()

    def _cap(self, batch: int) -> int:
        return min(batch, self.first_fail - 1) if self.first_fail is not None else batch

    def _start_confirm(self) -> None:
        self.line = fit_line(self.points[-2:])
        predicted = self._cap(self.line.batch_for(self.budget))
        self.predictions.append(predicted)
        cap = self.first_fail - 1 if self.first_fail is not None else None
        # a line too flat to predict (the batch barely shows in the memory) starts just above the last fit
        self.confirm = Confirm(max(predicted, self.best_fit + 1), cap=cap, floor_fit=self.best_fit,
                               precision=self.precision)

    def _refit(self, point: tuple[int, int]) -> None:
        """A fit far out measures the step near the edge: the line through it and the last fit predicts again."""
        assert self.confirm is not None
        if len(self.predictions) > MAX_REFITS:
            return
        self.points.append(point)
        line = fit_line(self.points[-2:])
        again = self._cap(line.batch_for(self.budget))
        if line.per_sample_bytes > 0 and again > point[0] * (1 + 2 * CONFIRM_STEP):
            self.line = line
            self.predictions.append(again)
            self.confirm.aim(again)

    # ---- the answer -----------------------------------------------------------------------------
    def answer(self, margin_pct: float = DEFAULT_MARGIN_PCT) -> FitAnswer:
        largest = max((t.batch for t in self.trials if t.fits), default=0)
        recommended = largest
        if largest and self.line is not None and self.line.per_sample_bytes > 0:
            recommended = max(1, min(largest, chosen_batch(largest, self.line, self.budget, margin_pct / 100)))
        error = next((t.error for t in self.trials if t.error), None) if self.failed_whatever_the_batch() else None
        return FitAnswer(largest, recommended, self.line, self.budget, list(self.predictions), list(self.trials),
                         margin_pct, error)


def given(argv: list[str], option: ScriptOption | None) -> int | None:
    """The option's value in the user's command, else its default in the script (None: not a number)."""
    if option is None:
        return None
    value = option_value(argv, option)
    return int_or_none(value if value is not None else option.default)


@dataclass(frozen=True)
class FitCommand:
    """The user's command at the batch that fits: per-rank batch and, where the script has the option,
    gradient accumulation that keeps the global batch the user's command asked for."""
    argv: list[str]  # SCRIPT ARGS
    per_rank: int
    accumulation: int | None  # None: the script has no accumulation option (or none was needed)
    world_size: int
    user_global: int | None  # the user's batch × accumulation × ranks, when known

    @property
    def global_batch(self) -> int:
        return self.per_rank * (self.accumulation or 1) * self.world_size

    def run_argv(self, nproc: int | None) -> list[str]:
        return ["mgtutor", "run", *(["--nproc", str(nproc)] if nproc else []), "--", *self.argv]

    def to_json(self, nproc: int | None) -> dict[str, Any]:
        return {"argv": self.run_argv(nproc), "per_rank_batch": self.per_rank, "accumulation": self.accumulation,
                "world_size": self.world_size, "global_batch": self.global_batch, "user_global_batch": self.user_global}


def command_for(target: list[str], batch: int, world_size: int, batch_option: ScriptOption,
                accumulation_option: ScriptOption | None) -> FitCommand:
    """`target` at per-rank `batch` at most; where the script accumulates gradients, the split of the user's
    global batch with the fewest accumulation steps (training/runs/batchfit.py `split_global`)."""
    user_batch, user_accum = given(target, batch_option), given(target, accumulation_option) or 1
    user_global = user_batch * user_accum * world_size if user_batch else None
    if user_global is None or accumulation_option is None:
        return FitCommand(with_option(target, batch_option, batch), batch, None, world_size, user_global)
    split = split_global(user_global, world_size, batch)
    argv = with_option(with_option(target, batch_option, split.per_rank), accumulation_option, split.accumulation)
    return FitCommand(argv, split.per_rank, split.accumulation, world_size, user_global)
