"""Every lesson's steps for real on CPU/gloo through the launcher: each check passes on the reference
solution and fails on the broken exercise; GPU-only steps skip with a reason; the example scripts run
under plain torchrun with mgtutor made unimportable; `mgtutor lessons check` keeps its exit codes.

Lesson 05's exercise and its first step (the exercise's solution) are run once, by the CLI's two checks (the
`lesson05_cli` fixture, tests/lesson_runs.py): its steps test judges those two records as it judges a run it made.
Lesson 01's steps run once, in Chinese, where the Lessons screen runs them (IN_THE_APP). Every step runs on the real
torchrun, and so do the exercises of 05 and 14; the other exercises, and the solutions no step runs (03's, 14's), start
their real ranks through the stand-in torchrun (THROUGH_THE_STANDIN). Broken exercises whose every rank fails alike
run on one rank (ONE_RANK_FAILS)."""
from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from mgtutor.lessons.checks import evaluate, outcome_of
from mgtutor.lessons.loader import all_lessons, get_lesson
from mgtutor.lessons.runner import finish_step, run_step, step_spec
from mgtutor.training.runs.records.record import RunRecord
from tests.lesson_runs import GROUP, LESSON, lesson05_cli  # noqa: F401  (a fixture)

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def describe(result) -> str:
    lines = [f"{result.step}: {result.status} {result.reason}"]
    lines += [f"  {c.mark} {c.says}: {c.detail}" for c in result.checks]
    if result.run_path:
        for name in sorted(os.listdir(os.path.join(result.run_path, "logs"))):
            text = open(os.path.join(result.run_path, "logs", name), errors="replace").read()
            lines.append(f"--- {name}\n{text[-1500:]}")
    return "\n".join(lines)


# The checks a broken exercise fails, exactly: every other one passes.
EXERCISE_FAILS = {
    "03-dataparallel": {"in epoch 0 the ranks read different samples", "in epoch 1 too",
                        "the loss is the one a single process reaches on the same samples"},
    "04-ddp-torchrun": {"all replicas hold the same weights after training"},
    "08-batch-lr-scaling": {"one gradient all-reduce per optimizer step, not one per micro-step"},
    "14-when-it-goes-wrong": {"every rank got past init_process_group and ran to the end",
                              "the process group has the 2 ranks torchrun started",
                              "both ranks answered the all_reduce"},
}
# Broken exercises whose every rank fails alike, on its own: run on one rank, their EXERCISE_FAILS the same as on two.
# Lesson 14's script tells the process group 3 ranks, so each rank waits at init_process_group for ranks that never
# come, however many torchrun started (nothing gets past init to report). Lesson 08's DDP all-reduces on every
# micro-step: each rank counts its own all-reduces (syncs_per_update 4), and one rank's replica is the same as itself.
ONE_RANK_FAILS = {"08-batch-lr-scaling", "14-when-it-goes-wrong"}
# Exercises whose point is the lesson's checks judging what the ranks reported, not torchrun's agent: their ranks
# (real torch on gloo) start through the stand-in torchrun, as do the solutions no step runs. The real torchrun keeps
# every step and the exercises of 05 (through `mgtutor lessons check`, lesson05_cli) and 14 (a rank left waiting at
# init_process_group by torchrun's store).
THROUGH_THE_STANDIN = {"03-dataparallel", "04-ddp-torchrun", "06-rank0-checkpoints", "08-batch-lr-scaling"}


def judged(lesson, step, record: Path, script: Path | None = None):
    """A run already made, judged as `run_step` judges the run it makes (`finish_step` on its record)."""
    return finish_step(lesson, step, SimpleNamespace(record=RunRecord(record)), script)


def launched_alike(lesson, step, script: Path) -> bool:
    """Whether the step and the exercise's check of `script` launch the same run (all but the label)."""
    mine, check = (step_spec(lesson, s, path, "gloo", 0) for s, path in ((step, None), (lesson.exercise.step, script)))
    return replace(mine, label="") == replace(check, label="")


# Lesson 01's steps (one rank, and a GPU step skipped here) run in the Chinese Lessons walk, which asserts these
# same things of them: test_zh_every_mode.py::test_a_lesson_run_and_its_checks (assert_lesson01_steps_as_on_cpu).
IN_THE_APP = "01-check-gpus"


@pytest.mark.parametrize("lesson", [pytest.param(lesson, id=lesson.id, marks=[GROUP] if lesson.id == LESSON else [])
                                    for lesson in all_lessons() if lesson.id != IN_THE_APP])
def test_lesson_steps_on_cpu(lesson, request):
    exercise = lesson.exercise
    made = request.getfixturevalue("lesson05_cli") if lesson.id == LESSON else None  # the CLI's runs of 05
    solved = False  # whether a step ran the reference solution (then judged with the exercise's checks too)
    for step in lesson.steps:
        is_solution = exercise and step.script == exercise.solution and step.args == exercise.step.args
        if made and is_solution:
            assert launched_alike(lesson, step, exercise.solution)  # `check --solution` ran this very step
            result = judged(lesson, step, made.solution.record)
        else:
            result = run_step(lesson, step, backend="gloo", gpus=0)
        if step.gpu_only:
            assert result.status == "skipped" and "GPU" in result.reason
            continue
        if step.requires and result.status == "skipped":
            assert "pip install" in result.reason
            continue
        assert result.status == "passed", describe(result)
        assert all(c.passed for c in result.checks)
        if is_solution:
            # The reference solution is this very run: judge it with the exercise's checks too.
            solution_checks = evaluate(exercise.step.checks, outcome_of(RunRecord(result.run_path)))
            assert all(c.passed for c in solution_checks), [(c.says, c.detail) for c in solution_checks]
            solved = True
    if exercise:
        if lesson.id in THROUGH_THE_STANDIN:
            request.getfixturevalue("standin_torchrun")
        if made:  # `mgtutor lessons check 05` ran the workspace copy as given: the broken exercise
            assert made.broken.workspace == exercise.broken.read_text()
            broken = judged(lesson, exercise.step, made.broken.record, exercise.broken)
        else:
            ranks = 1 if lesson.id in ONE_RANK_FAILS else exercise.step.nproc
            broken = run_step(lesson, replace(exercise.step, nproc=ranks), script=exercise.broken, backend="gloo",
                              gpus=0)
        assert broken.status == "failed", describe(broken)
        failed = [c for c in broken.checks if not c.passed]
        assert failed and all(c.detail for c in failed)
        if lesson.id in EXERCISE_FAILS:
            assert {c.says for c in failed} == EXERCISE_FAILS[lesson.id]
    if exercise and not solved:  # no step runs it (03, 14): the exercise's check passes on the reference solution
        request.getfixturevalue("standin_torchrun")
        solution = run_step(lesson, exercise.step, script=exercise.solution, backend="gloo", gpus=0)
        assert solution.status == "passed", describe(solution)
        assert all(c.passed for c in solution.checks)


POISON = "raise ImportError('lesson scripts must not need mgtutor')\n"


def test_example_runs_under_plain_torchrun_without_mgtutor(tmp_path):
    poison = tmp_path / "poison" / "mgtutor"
    poison.mkdir(parents=True)
    (poison / "__init__.py").write_text(POISON)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MGTUTOR_")}
    env.update(PYTHONPATH=str(poison.parent), OMP_NUM_THREADS="1", GLOO_SOCKET_IFNAME="lo")
    probe = subprocess.run([sys.executable, "-c", "import mgtutor"], env=env, cwd=tmp_path,
                           capture_output=True, text=True)
    assert "must not need mgtutor" in probe.stderr  # the poison really shadows the installed package
    example = get_lesson("05").example
    # One rank: needing mgtutor (its import, its launcher's environment) is each rank's own; lesson 05's steps run
    # this script on 2 ranks through the launcher.
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "1",
                           str(example)], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count('"epoch": 1') == 1  # the rank reported its second epoch


@GROUP
def test_cli_check_exit_codes_on_workspace_and_solution(lesson05_cli):
    broken = lesson05_cli.broken.proc
    assert broken.returncode == 1, broken.stdout + broken.stderr
    assert "✗ in epoch 0 the ranks saw different samples" in broken.stdout
    assert "every rank trains on the same data" in broken.stdout
    assert not lesson05_cli.broken.progress_done
    solution = lesson05_cli.solution.proc
    assert solution.returncode == 0, solution.stdout + solution.stderr
    assert "[rank 1]" in solution.stdout  # the ranks' own output streamed through
    assert not lesson05_cli.solution.progress_done  # the reference solution is not the learner's work
