"""Run a lesson's steps for real through the launcher (so every run has a run record), then check them.

    result = run_step(lesson, lesson.steps[0], on_line=print)   # -> StepResult with ✓/✗ per check
    results = check_lesson(lesson, solution=False)               # the learner's workspace copy

The TUI uses the two halves, `start_step` (returns the Run, which the App then owns) and
`finish_step`, from a thread worker. Headless: never imports torch, textual or rich.
"""
from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mgtutor.training.foundation.i18n import N_
from mgtutor.training.foundation.said import Said, keep
from mgtutor.training.runs.nvml import inventory
from mgtutor.lessons.checks import CheckResult, evaluate, outcome_of
from mgtutor.lessons.loader import Lesson, Step
from mgtutor.lessons.progress import Progress, ensure_workspace
from mgtutor.training.runs.launch.launcher import LaunchSpec, Run, launch
from mgtutor.training.runs.records.record import RunStatus
from mgtutor.training.runs.follow.session import RunSession

LineCallback = Callable[[int | None, str, str], None]
INSTALL_HINTS = {"accelerate": "pip install accelerate"}


@dataclass
class StepResult:
    lesson_id: str
    step: str
    title: str
    script: str
    status: str                                    # passed | failed | skipped
    checks: list[CheckResult] = field(default_factory=list)
    reason: str = ""                               # why skipped, or a note on a failed run (a Said, kept)
    run_id: str | None = None
    run_path: str | None = None
    measures: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"lesson": self.lesson_id, "step": self.step, "title": self.title, "script": self.script,
                "status": self.status, "reason": self.reason, "run_id": self.run_id, "run_path": self.run_path,
                "measures": self.measures,
                "checks": [{"says": c.says, "passed": c.passed, "detail": c.detail} for c in self.checks]}


def gpu_count() -> int:
    return len(inventory().gpus)


def skip_reason(step: Step, backend: str = "auto", gpus: int | None = None) -> Said | None:
    """Why this step cannot run here (None: it can)."""
    for module in step.requires:
        if importlib.util.find_spec(module) is None:
            return Said(N_("needs the {module} package: {install}"),
                        module=module, install=INSTALL_HINTS.get(module, f"pip install {module}"))
    if not step.gpu_only:
        return None
    gpus = gpu_count() if gpus is None else gpus
    need = max(step.min_gpus, 1)
    if backend == "gloo":
        return Said(N_("runs on NVIDIA GPUs only; it was asked to run on gloo/CPU"))
    if gpus < need:  # the English says "NVIDIA GPU" (GPU_SKIP): progress tells a GPU skip by it
        have = Said(N_("no NVIDIA GPU is usable here")) if gpus == 0 else Said(N_("this machine has {gpus}"), gpus=gpus)
        return Said(N_("needs {need} NVIDIA GPU(s); {have}"), need=need, have=have)
    return None


def choose_backend(step: Step, backend: str, gpus: int) -> str:
    """nccl when every rank can have its own GPU; a CPU step on too few GPUs runs on gloo instead."""
    if backend != "auto":
        return backend
    return "nccl" if gpus >= step.nproc and gpus > 0 else "gloo"


def step_spec(lesson: Lesson, step: Step, script: Path | None, backend: str, gpus: int) -> LaunchSpec:
    """How a step is launched. A step on gloo runs CPU ranks and sees no GPU: on a machine with fewer
    GPUs than ranks, a library that looks for one (Accelerate's barrier asks for cuda:LOCAL_RANK)
    would otherwise reach for a GPU that is not there."""
    target = [str(script or step.script), *step.args]
    chosen = choose_backend(step, backend, gpus)
    env = dict(step.env)
    if chosen == "gloo":
        env.setdefault("CUDA_VISIBLE_DEVICES", "")
    return LaunchSpec(target=target, nproc=step.nproc, backend=chosen, label=f"lesson-{lesson.number:02d}-{step.name}",
                      env=env, cwd=str(Path(target[0]).parent))


def start_step(lesson: Lesson, step: Step, script: Path | None = None, backend: str = "auto",
               gpus: int | None = None) -> Run:
    """Launch the step's script (or the given copy of it); raises LaunchError with a fix on bad input."""
    return launch(step_spec(lesson, step, script, backend, gpu_count() if gpus is None else gpus))


def follow(run: Run, timeout_s: float, on_line: LineCallback | None = None) -> bool:
    """Pass every line to on_line until the run ends; stop it after timeout_s. True if it was stopped."""
    for update in RunSession(run.record, run, timeout_s=timeout_s).updates():
        if on_line:
            for rank, stream, line in update.lines:
                on_line(rank, stream, line)
        if update.final:
            return update.timed_out
    return False


def finish_step(lesson: Lesson, step: Step, run: Run, script: Path | None = None, stopped: bool = False) -> StepResult:
    outcome = outcome_of(run.record)
    checks = evaluate(step.checks, outcome)
    passed = all(c.passed for c in checks) and outcome.result.status in (RunStatus.FINISHED, RunStatus.FAILED)
    measures = {key: outcome.last(0, key) for key in step.measures if outcome.last(0, key) is not None}
    reason = Said(N_("stopped after {seconds:g} s without finishing"), seconds=step.timeout_s) if stopped else ""
    return StepResult(lesson.id, step.name, step.title, str(script or step.script),
                      "passed" if passed else "failed", checks, reason,
                      run.record.run_id, str(run.record.path), measures)


def run_step(lesson: Lesson, step: Step, script: Path | None = None, backend: str = "auto",
             on_line: LineCallback | None = None, gpus: int | None = None) -> StepResult:
    gpus = gpu_count() if gpus is None else gpus
    reason = skip_reason(step, backend, gpus)
    if reason:
        return StepResult(lesson.id, step.name, step.title, str(script or step.script), "skipped", reason=reason)
    run = start_step(lesson, step, script, backend, gpus)
    stopped = follow(run, step.timeout_s, on_line)
    return finish_step(lesson, step, run, script, stopped)


def overall(results: list[StepResult]) -> str:
    """passed only when something ran and nothing failed or was skipped."""
    if any(r.status == "failed" for r in results):
        return "failed"
    if not results or any(r.status == "skipped" for r in results):
        return "skipped"
    return "passed"


def run_lesson(lesson: Lesson, backend: str = "auto", on_line: LineCallback | None = None,
               progress: Progress | None = None) -> list[StepResult]:
    """Every step of the lesson (its example scripts). For a lesson with no exercise this is its check."""
    gpus = gpu_count()
    results = [run_step(lesson, step, backend=backend, on_line=on_line, gpus=gpus) for step in lesson.steps]
    if progress is not None:
        for result in results:
            progress.record_step(lesson.id, result.step, result.status, result.run_id)
        if lesson.exercise is None:
            progress.record_check(lesson.id, overall(results), summarize(results))
    return results


def check_lesson(lesson: Lesson, solution: bool = False, backend: str = "auto",
                 on_line: LineCallback | None = None, progress: Progress | None = None) -> list[StepResult]:
    """The lesson's checks: on the learner's workspace copy of the exercise (or the reference
    solution), or, for a lesson without an exercise, on its steps."""
    if lesson.exercise is None:
        return run_lesson(lesson, backend, on_line, progress)
    script = lesson.exercise.solution if solution else ensure_workspace(lesson)
    results = [run_step(lesson, lesson.exercise.step, script=script, backend=backend, on_line=on_line)]
    if progress is not None and not solution:
        progress.record_check(lesson.id, overall(results), summarize(results))
    return results


def summarize(results: list[StepResult]) -> list[dict[str, Any]]:
    """The results as the progress keeps them: the words as message ids with their arguments (a
    `Said`'s JSON), so that they are said in the language of whoever reads them later."""
    return [{"step": r.step, "title": keep(r.title), "status": r.status, "reason": keep(r.reason),
             "checks": [{"says": keep(c.says), "passed": c.passed, "detail": keep(c.detail)} for c in r.checks]}
            for r in results]
