"""The lessons and `mgtutor check` agree: examples and reference solutions have no error-level finding,
and each exercise's broken script has exactly the finding it teaches, beyond those its solution has."""
from __future__ import annotations

import json

import pytest

from mgtutor.diagnostics.check.script import check_file
from mgtutor.diagnostics.check.rules import RULES_BY_ID
from mgtutor.lessons.loader import PATH, lessons_root, load_lesson

# The rule(s) each exercise teaches, when lesson.json does not name it (`exercise.check_rule`).
# None: the mistake is not visible in the code (a measured one), so the check must stay silent.
# Lesson 6 teaches two habits at once: log on rank 0 only, and save on rank 0 only.
TAUGHT: dict[str, str | tuple[str, ...]] = {
    "04-ddp-torchrun": "no-ddp-wrap",
    "05-distributed-sampler": "ddp-no-sampler",
    "06-rank0-checkpoints": ("unguarded-checkpoint", "unguarded-print"),
}


def present_lessons():
    root = lessons_root()
    return [load_lesson(root / lesson_id, n) for n, lesson_id in enumerate(PATH, start=1)
            if (root / lesson_id / "lesson.json").is_file()]


LESSONS = present_lessons()
EXERCISES = [lesson for lesson in LESSONS if lesson.exercise is not None]


def test_lessons_are_there_to_check():
    assert len(LESSONS) >= 3 and EXERCISES


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda lesson: lesson.id)
def test_examples_and_solutions_have_no_error_level_finding(lesson):
    scripts = {lesson.example, *(step.script for step in lesson.steps)}
    if lesson.exercise:
        scripts.add(lesson.exercise.solution)
    for script in sorted(scripts):
        errors = [(f.rule, f.line) for f in check_file(script) if f.severity == "error"]
        assert errors == [], f"{script.name}: {errors}"


def taught_rules(lesson) -> set[str] | None:
    data = json.loads((lesson.path / "lesson.json").read_text(encoding="utf-8"))
    taught = data["exercise"].get("check_rule", TAUGHT.get(lesson.id))
    if taught is None:
        return None
    return {taught} if isinstance(taught, str) else set(taught)


@pytest.mark.parametrize("lesson", EXERCISES, ids=lambda lesson: lesson.id)
def test_each_broken_exercise_gives_exactly_the_finding_it_teaches(lesson):
    broken = {f.rule for f in check_file(lesson.exercise.broken)}
    solved = {f.rule for f in check_file(lesson.exercise.solution)}
    taught = taught_rules(lesson)
    if taught is None:
        assert broken - solved == set(), f"{lesson.id}: findings the solution does not have: {broken - solved}"
        return
    assert taught <= set(RULES_BY_ID)
    assert broken - solved == taught
    assert not taught & solved
    if lesson.id in TAUGHT:  # the finding sends the learner back to this very lesson
        assert all(RULES_BY_ID[rule].lesson == lesson.id for rule in taught)


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda lesson: lesson.id)
def test_distributed_scripts_model_timeouts_and_rank_tagged_output(lesson):
    """Our own teaching material should not carry the habits `mgtutor check` advises against."""
    scripts = {lesson.example, *(step.script for step in lesson.steps)}
    if lesson.exercise:
        scripts |= {lesson.exercise.solution, lesson.exercise.broken}
    taught = taught_rules(lesson) if lesson.exercise else None
    for script in sorted(scripts):
        rules = {f.rule for f in check_file(script)}
        allowed = taught if (lesson.exercise and script == lesson.exercise.broken and taught) else set()
        assert (rules & {"init-no-timeout", "unguarded-print", "sync-every-step"}) - allowed == set(), script.name
