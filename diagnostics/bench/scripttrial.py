"""One trial of `mgtutor fit`: the user's script under torchrun at one batch, through the run layer's launcher
(so every rank gets the ranks' hook), ended by the hook after K optimizer steps, read back from its events.

The hook (training/worker/batch/fit_trial.py) ends each rank itself: exit 0 after the K-th step with a `step`
event (`stopped`, the peak and the budget), or exit 1 at an uncaught error with an `error` event
(`error: "cuda_oom"` for an out-of-memory). torchrun ends the other ranks when one fails; if any is still
there OOM_GRACE_S after an OOM event (blocked in a collective with the rank that left, say), the trial
stops the run itself: an OOM on one rank never leaves the trial waiting. Every trial is a run record.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from mgtutor.diagnostics.bench.scriptfit import DEFAULT_MARGIN_PCT, FitAnswer, FitSearch, FitTrial
from mgtutor.diagnostics.check.script_options import ScriptOption, with_option
from mgtutor.diagnostics.failures.classify import diagnose_run
from mgtutor.training.foundation.i18n import _
from mgtutor.training.runs.batchfit import STOP_ENV, TRIAL_BATCH_ENV
from mgtutor.training.runs.events.reader import read_events
from mgtutor.training.runs.events.types import ErrorEvent, StepEvent
from mgtutor.training.runs.follow.session import RunSession, Update
from mgtutor.training.runs.launch.launcher import LaunchSpec, Run, launch
from mgtutor.training.runs.records.record import RunRecord

DEFAULT_STEPS = 3  # step 1 makes the optimizer's state; by step 3 weights, gradients, state and activations coexist
OOM_GRACE_S = 5.0
_MIB = 1 << 20


class NoDeviceMemory(Exception):
    """The ranks trained, but on no GPU: there is no device memory to fit."""


@dataclass(frozen=True)
class TrialPlan:
    target: list[str]  # SCRIPT ARGS as the user gave them
    option: ScriptOption  # the batch option each trial sets
    nproc: int | None = None
    backend: str = "auto"
    steps: int = DEFAULT_STEPS
    timeout_s: float = 600.0
    cwd: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    accumulation: ScriptOption | None = None  # the script's gradient accumulation option (the command keeps the global batch)

    def spec(self, batch: int) -> LaunchSpec:
        script = self.target[1] if self.target[:1] == ["-m"] and len(self.target) > 1 else self.target[0]
        return LaunchSpec(target=with_option(self.target, self.option, batch), nproc=self.nproc, backend=self.backend,
                          label=f"fit-{script.rsplit('/', 1)[-1]}-b{batch}", cwd=self.cwd, instrument=True,
                          env={**self.env, STOP_ENV: str(self.steps), TRIAL_BATCH_ENV: str(batch)})


def run_trial(plan: TrialPlan, batch: int, phase: str, on_start: Callable[[Run], None] | None = None) -> FitTrial:
    """Launch, follow to the end (or stop after an OOM's grace), read what every rank wrote."""
    began = time.monotonic()
    run = launch(plan.spec(batch))
    if on_start:
        on_start(run)
    final = follow_trial(RunSession(run.record, run, timeout_s=plan.timeout_s))
    trial = read_trial(run.record, batch, phase, plan.steps, final)
    trial.seconds = time.monotonic() - began
    return trial


def follow_trial(session: RunSession) -> Update:
    oom_at: float | None = None
    final = None
    try:
        for update in session.updates():
            if update.final:
                final = update
                break
            if oom_at is None and any(isinstance(e, ErrorEvent) and e.error == "cuda_oom" for e in update.events):
                oom_at = time.monotonic()
            if oom_at is not None and time.monotonic() - oom_at > OOM_GRACE_S:
                break
    finally:
        final = final or session.stop(grace=5.0)
    return final


def read_trial(record: RunRecord, batch: int, phase: str, steps: int, final: Update) -> FitTrial:
    """The trial's outcome from its events (the hook's), and from its logs where the ranks said nothing."""
    events = read_events(record.events_path)
    stopped = {e.rank: e for e in events if isinstance(e, StepEvent) and e.extra.get("stopped")}
    oom = sorted({e.rank for e in events if isinstance(e, ErrorEvent) and e.error == "cuda_oom"})
    trial = FitTrial(batch, phase, fits=False, run_id=record.run_id, oom_ranks=oom)
    world = record.meta().world_size or 1
    if not oom and len(stopped) >= world:
        if not all("mem_reserved_peak_mib" in e.extra for e in stopped.values()):
            raise NoDeviceMemory(_("the ranks ran on no GPU, so there is no device memory to fit a batch to"))
        trial.fits = True
        trial.peaks = {r: int(float(e.extra["mem_reserved_peak_mib"]) * _MIB) for r, e in stopped.items()}
        trial.budgets = {r: int(float(e.extra["mem_budget_mib"]) * _MIB) for r, e in stopped.items()}
        return trial
    raised = sorted((e for e in events if isinstance(e, ErrorEvent) and e.phase == "fit_trial"), key=lambda e: e.t)
    if raised and not oom:  # the hook saw the script's own uncaught error
        first = raised[0]
        trial.error = f"rank {first.rank}: {first.exception}: {first.message}"
    elif not oom:
        trial.oom_ranks, trial.error = failure(record, final, steps, len(stopped))
    return trial


def failure(record: RunRecord, final: Update, steps: int, stopped: int) -> tuple[list[int], str | None]:
    """(ranks that ran out of memory, or else what went wrong) for a trial without the hook's OOM event:
    a script that caught its own OOM and exited still says so in its log."""
    findings = list(final.findings) or _findings(record)
    ooms = sorted({f.rank for f in findings if f.kind == "cuda_oom" and f.rank is not None})
    if ooms or any(f.kind == "cuda_oom" for f in findings):
        return ooms or [0], None
    if final.timed_out:
        return [], _("no answer within the trial's time limit")
    if findings:
        top = findings[0]
        where = "" if top.rank is None else _(" (rank {rank})").format(rank=top.rank)
        shown = next((str(ev.get("text", "")).strip() for ev in top.evidence if ev.get("text")), "")
        return [], f"{top.kind}{where}: {top.summary}" + (f" | {shown[:200]}" if shown else "")
    result = final.result
    if result is not None and result.first_failure is None and stopped == 0:
        return [], _("the script ended before its optimizer stepped {steps} times (mgtutor fit measures the first "
                     "{steps} steps: does it step a torch optimizer?)").format(steps=steps)
    return [], last_error_line(record) or _("the ranks failed ({outcome})").format(
        outcome=result.describe(_) if result else "?")


def _findings(record: RunRecord) -> list:
    try:
        return diagnose_run(record)
    except Exception:  # noqa: BLE001 - the trial's own outcome still stands
        return []


def last_error_line(record: RunRecord) -> str | None:
    """The last line of the first rank's stderr that looks like an exception (a traceback's last line)."""
    for info in sorted(record.ranks(), key=lambda r: (r.exit_code in (0, None), r.rank)):
        try:
            lines = record.rank_log(info.rank, "stderr").read_text(errors="replace").splitlines()
        except OSError:
            continue
        said = [line for line in lines if "Error" in line or "Exception" in line]
        if said:
            return f"rank {info.rank}: {said[-1].strip()[:300]}"
    return None


def fit_script(plan: TrialPlan, search: FitSearch, margin_pct: float = DEFAULT_MARGIN_PCT,
               on_trial: Callable[[FitTrial], None] | None = None,
               on_start: Callable[[Run], None] | None = None) -> FitAnswer:
    """Trials until the search has its answer; each trial to `on_trial` as it ends. NoDeviceMemory on CPU ranks."""
    while (step := search.next_batch()) is not None:
        trial = run_trial(plan, *step, on_start=on_start)
        search.record(trial)
        if on_trial:
            on_trial(trial)
    return search.answer(margin_pct)
