"""The lessons' use of `mgtutor convert`: lesson 05's converted script is exactly what convert writes,
and its explanation quotes the real diff. The two exercises (lesson 03: a one-GPU script made DDP by
hand; lesson 14: a script that sets its own world size), judged by what the runs did, are run once,
with every lesson's steps: tests/test_lessons_runs.py (EXERCISE_FAILS names the checks each fails; each
solution passes them all)."""
from __future__ import annotations

from pathlib import Path

import pytest

from mgtutor.diagnostics.check.convert.to_ddp import convert_source
from mgtutor.diagnostics.check.fix.apply import unified_diff

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
