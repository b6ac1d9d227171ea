"""Start the batch finder on N ranks and read its answer back from the run's events (headless).

`mgtutor bench maxbatch` and the Troubleshoot screen both call `start` and `answer`; the search
itself runs in the ranks (mgtutor.training.worker.batch.maxbatch), never in this process.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mgtutor.training.runs.events.types import BatchResultEvent, BatchTrialEvent, ErrorEvent
from mgtutor.training.runs.events.writer import read_events
from mgtutor.training.runs.launch.launcher import LaunchSpec, Run, launch
from mgtutor.training.runs.records.record import RunRecord
from mgtutor.training.runs.follow.session import RunSession, follow_to_end
from mgtutor.training.foundation.i18n import N_, _, cell_width

WORKER = ["-m", "mgtutor.training.worker.batch.maxbatch"]
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
        """The finder's answer, one labelled line per fact, in the language in force."""
        r = self.result
        if r is None:
            return [_("batch finder: no answer") + (f" ({self.errors[0]})" if self.errors else "")]
        facts = [
            (N_("chosen batch"), _("{batch} per rank ({margin} of the GPU memory kept free)").format(
                batch=r.chosen_batch, margin=f"{r.margin_pct:g} %")),
            (N_("measured maximum"), _("{batch} (predicted from the memory line: {predicted})").format(
                batch=r.measured_max, predicted=r.predicted)),
            (N_("per sample"), _("{mib:,.2f} MiB (activations and the input)").format(mib=r.per_sample_bytes / (1 << 20))),
            (N_("fixed"), _("{gib:,.2f} GiB (weights, gradients, optimizer state)").format(gib=r.fixed_bytes / GIB)),
            (N_("usable per rank"), _("{gib:,.1f} GiB (the smallest over {ranks} rank(s))").format(
                gib=r.budget_bytes / GIB, ranks=r.world_size or 1)),
            (N_("search"), _("{count} trials in {seconds:.1f} s").format(count=len(r.extra.get("trials", [])),
                                                                       seconds=r.seconds))]
        if r.proved_steps:
            facts.append((N_("proof"), _("{steps} steps at batch {batch}: {outcome}").format(
                steps=r.proved_steps, batch=r.chosen_batch, outcome=_("trained") if r.proved else _("OUT OF MEMORY"))))
        split = r.extra.get("split")
        if isinstance(split, dict):
            facts.append((N_("global batch"), _("{total} = {per_rank} per rank × {accumulation} accumulation × {ranks} "
                                                "rank(s)  (--batch-size {per_rank} --grad-accum {accumulation})").format(
                total=split["global_batch"], per_rank=split["per_rank"], accumulation=split["accumulation"],
                ranks=split["world_size"])))
        return [padded(_(label), LABEL_CELLS) + value for label, value in facts]


LABEL_CELLS = 18  # the labels' column, in terminal cells


def padded(text: str, cells: int) -> str:
    """`text` and spaces to fill `cells` terminal cells (a CJK character takes two)."""
    return text + " " * max(1, cells - cell_width(text))


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
