"""The lessons' use of `mgtutor convert`: lesson 05's converted script is exactly what convert writes,
its explanation quotes the real diff, and the two exercises (lesson 03: a one-GPU script made DDP by
hand; lesson 14: a script that sets its own world size) are judged by what the runs did."""
from __future__ import annotations

from pathlib import Path

import pytest

from mgtutor.diagnostics.check.convert import convert_source
from mgtutor.diagnostics.check.fix import unified_diff
from mgtutor.lessons.loader import get_lesson
from mgtutor.lessons.runner import run_step

LESSONS = Path(__file__).parent.parent / "lessons"


@pytest.mark.parametrize("one_gpu, converted", [
    ("05-distributed-sampler/single_gpu.py", "05-distributed-sampler/single_gpu_ddp.py"),
    ("03-dataparallel/exercise.py", "03-dataparallel/solution.py"),
])
def test_the_shipped_ddp_script_is_what_convert_writes(one_gpu, converted):
    source = (LESSONS / one_gpu).read_text()
    assert convert_source(source, one_gpu).after == (LESSONS / converted).read_text()


def test_lesson_05_quotes_the_real_diff():
    text = (LESSONS / "05-distributed-sampler" / "explanation.md").read_text()
    quoted = text.split("## Let mgtutor convert do it", 1)[1].split("```")[1]
    source = (LESSONS / "05-distributed-sampler" / "single_gpu.py").read_text()
    diff = unified_diff(source, convert_source(source, "single_gpu.py").after, "single_gpu.py").splitlines()
    lines = [line for line in quoted.splitlines() if line.startswith(("+", "-"))]
    assert len(lines) >= 8 and all(line in diff for line in lines)


@pytest.mark.integration
@pytest.mark.parametrize("lesson_id, failing", [
    ("03-dataparallel", {"in epoch 0 the ranks read different samples", "in epoch 1 too",
                         "the loss is the one a single process reaches on the same samples"}),
    ("14-when-it-goes-wrong", {"every rank got past init_process_group and ran to the end",
                               "the process group has the 2 ranks torchrun started",
                               "both ranks answered the all_reduce"}),
])
def test_exercise_fails_as_given_and_passes_when_solved(lesson_id, failing, monkeypatch):
    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    lesson = get_lesson(lesson_id)
    exercise = lesson.exercise
    assert exercise is not None
    broken = run_step(lesson, exercise.step, script=exercise.broken, backend="gloo")
    assert broken.status == "failed"
    assert {c.says for c in broken.checks if not c.passed} == failing
    solved = run_step(lesson, exercise.step, script=exercise.solution, backend="gloo")
    assert solved.status == "passed", [(c.says, c.detail) for c in solved.checks]
