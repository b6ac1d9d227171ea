"""Start the batch finder on N ranks and read its answer back from the run's events (headless).

`mgtutor bench maxbatch` and the Troubleshoot screen both call `start` and `answer`; the search
itself runs in the ranks (mgtutor.training.worker.maxbatch), never in this process.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mgtutor.training.runs.event_types import BatchResultEvent, BatchTrialEvent, ErrorEvent
from mgtutor.training.runs.events import read_events
from mgtutor.training.runs.launcher import LaunchSpec, Run, launch
from mgtutor.training.runs.records import RunRecord
from mgtutor.training.runs.session import RunSession, follow_to_end

WORKER = ["-m", "mgtutor.training.worker.maxbatch"]
GIB = 1 << 30


@dataclass(frozen=True)
class FinderOptions:
    model: str = "resnet50"
    image_size: int = 224
    nproc: int | None = None
    amp: str = "auto"
    channels_last: str = "auto"
    global_batch: int | None = None
    margin_pct: float = 5.0
    max_batch: int | None = None
    prove_steps: int = 20
    share_gpu: bool = False
    backend: str = "auto"

    def worker_argv(self) -> list[str]:
        argv = [*WORKER, "--model", self.model, "--image-size", str(self.image_size), "--amp", self.amp,
                "--channels-last", self.channels_last, "--margin", f"{self.margin_pct:g}",
                "--prove-steps", str(self.prove_steps)]
        if self.global_batch:
            argv += ["--global-batch", str(self.global_batch)]
        if self.max_batch:
            argv += ["--max-batch", str(self.max_batch)]
        if self.share_gpu:
            argv.append("--share-gpu")
        return argv

    def problem(self) -> str | None:
        if self.image_size < 8 or (self.model == "vit_b_16" and self.image_size % 16):
            return "--image-size must be at least 8 (a multiple of 16 for vit_b_16)"
        if not 0 <= self.margin_pct < 50:
            return "--margin is a percentage of the GPU memory: 0 or more, below 50"
        for flag, value in (("--global-batch", self.global_batch), ("--max-batch", self.max_batch),
                            ("--nproc", self.nproc)):
            if value is not None and value < 1:
                return f"{flag} must be at least 1"
        if self.prove_steps < 0:
            return "--prove-steps must be 0 or more"
        return None


def start(options: FinderOptions, env: dict[str, str] | None = None) -> Run:
    """Launch the finder; ranks sharing one GPU agree over gloo (NCCL refuses two ranks on one GPU)."""
    backend = "gloo" if options.share_gpu else options.backend
    return launch(LaunchSpec(target=options.worker_argv(), nproc=options.nproc, backend=backend,
                             label=f"maxbatch-{options.model}", env=dict(env or {})))


@dataclass
class FinderAnswer:
    result: BatchResultEvent | None
    trials: list[BatchTrialEvent] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        if self.result is None:
            return {"ok": False, "errors": self.errors, "trials": [_trial_json(t) for t in self.trials]}
        out = self.result.to_json()
        for key in ("rank", "t", "type", "kind"):
            out.pop(key, None)
        out["ok"] = bool(self.result.proved is not False)
        out["errors"] = self.errors
        return out

    def summary_lines(self) -> list[str]:
        r = self.result
        if r is None:
            return ["batch finder: no answer" + (f" ({self.errors[0]})" if self.errors else "")]
        lines = [f"chosen batch      {r.chosen_batch} per rank ({r.margin_pct:g} % of the GPU memory kept free)",
                 f"measured maximum  {r.measured_max} (predicted from the memory line: {r.predicted})",
                 f"per sample        {r.per_sample_bytes / (1 << 20):,.2f} MiB (activations and the input)",
                 f"fixed             {r.fixed_bytes / GIB:,.2f} GiB (weights, gradients, optimizer state)",
                 f"usable per rank   {r.budget_bytes / GIB:,.1f} GiB (the smallest over {r.world_size or 1} rank(s))",
                 f"search            {len(r.extra.get('trials', []))} trials in {r.seconds:.1f} s"]
        if r.proved_steps:
            lines.append(f"proof             {r.proved_steps} steps at batch {r.chosen_batch}: "
                         f"{'trained' if r.proved else 'OUT OF MEMORY'}")
        split = r.extra.get("split")
        if isinstance(split, dict):
            lines.append(f"global batch      {split['global_batch']} = {split['per_rank']} per rank × "
                         f"{split['accumulation']} accumulation × {split['world_size']} rank(s)  "
                         f"(--batch-size {split['per_rank']} --grad-accum {split['accumulation']})")
        return lines


def _trial_json(trial: BatchTrialEvent) -> dict[str, Any]:
    return {"batch": trial.batch, "fits": trial.fits, "peak_bytes": trial.peak_bytes, "phase": trial.phase}


def answer(record: RunRecord) -> FinderAnswer:
    """The finder's result event (rank 0), its trials, and any rank's error."""
    found = FinderAnswer(None)
    for event in read_events(record.events_path):
        if isinstance(event, BatchResultEvent):
            found.result = event
        elif isinstance(event, BatchTrialEvent):
            found.trials.append(event)
        elif isinstance(event, ErrorEvent):
            found.errors.append(f"rank {event.rank}: {event.description}")
    return found


def run_finder(options: FinderOptions, on_line: Callable[[int | None, str], None] | None = None,
               on_start: Callable[[Run], None] | None = None, timeout_s: float = 900) -> tuple[Run, FinderAnswer]:
    """Launch the finder, pass every rank line to `on_line` as it comes (each trial is one), return its answer."""
    run = start(options)
    if on_start:
        on_start(run)
    follow_to_end(RunSession(run.record, run, timeout_s=timeout_s), on_line)
    return run, answer(run.record)
