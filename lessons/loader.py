"""Lessons are data: one folder per lesson holding lesson.json, explanation.md and scripts.

    lessons/05-distributed-sampler/
        lesson.json       id, title, goal, prerequisites, steps (script, ranks, checks), exercise, hints
                          (an exercise's check names the hints that help when it fails: hints_if_failed)
        explanation.md    the lesson text (Markdown); explanation.zh.md the same in Simplified Chinese
        example.py        a standalone script: runs under plain torchrun, never imports mgtutor
        exercise.py       (optional) the deliberately broken script copied into the workspace

The path order is the order of PATH below; the folder names are the lesson ids other parts link to.
The words a person reads (title, goal, step titles, what a check says, the task, hints) stay English
in lesson.json and are translated through the gettext catalogue as a lesson loads: lessons are loaded
once per language. A step's title and what a check says are `Said`s, which keep their English: a check
result kept with the progress names them by it and is said again in the language that reads it.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from mgtutor.training.foundation.i18n import N_, _, current_language
from mgtutor.training.foundation.linebreak import join_soft_breaks
from mgtutor.training.foundation.said import Said

PATH = (
    "01-check-gpus", "02-single-gpu-baseline", "03-dataparallel", "04-ddp-torchrun",
    "05-distributed-sampler", "06-rank0-checkpoints", "07-accelerate", "08-batch-lr-scaling",
    "09-data-loading", "10-mixed-precision", "11-torch-compile", "12-watching-a-run",
    "13-nccl-topology", "14-when-it-goes-wrong", "15-multi-node", "16-fsdp",
)


SOURCE_NOTE = "<!-- translated from explanation.md sha256:"


class LessonError(Exception):
    """A lesson id that does not exist, or lesson data that does not load; one line for the user."""


@dataclass(frozen=True)
class Check:
    kind: str                      # a name in checks.CHECKS
    says: str                      # what it verifies, in words, shown with ✓/✗ (a Said from lesson.json)
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Step:
    name: str
    title: str
    script: Path
    args: tuple[str, ...] = ()
    nproc: int = 2
    gpu_only: bool = False
    min_gpus: int = 0              # a GPU-only step may need several GPUs
    requires: tuple[str, ...] = () # Python modules it needs; missing ones skip it with an install hint
    env: dict[str, str] = field(default_factory=dict)
    checks: tuple[Check, ...] = ()
    measures: tuple[str, ...] = () # report keys shown as the step's measured numbers
    timeout_s: float = 120.0       # a run still going after this is stopped: a hang is a failure


@dataclass(frozen=True)
class Exercise:
    task: str
    broken: Path
    solution: Path
    workspace_name: str
    step: Step                     # how the user's copy is run and checked (script = the solution)
    hints: tuple[str, ...] = ()


@dataclass(frozen=True)
class Lesson:
    id: str
    number: int
    title: str
    goal: str
    path: Path
    prerequisites: tuple[str, ...]
    steps: tuple[Step, ...]
    example: Path
    exercise: Exercise | None = None
    see_also: tuple[str, ...] = ()  # mgtutor commands that go further

    @property
    def gpu_only(self) -> bool:
        return bool(self.steps) and all(step.gpu_only for step in self.steps)

    @property
    def hints(self) -> tuple[str, ...]:
        return self.exercise.hints if self.exercise else ()

    def explanation(self) -> str:
        """The lesson text in the current language; English where it has no translation. A translation's
        first line names the English it was made from (`<!-- translated from … sha256:… -->`, for the
        test that notices a stale one); the reader never sees it. The files are hard-wrapped to stay
        readable for their translators: a line break between two Chinese characters is taken out here,
        where Markdown would show it as a space."""
        translated = self.path / f"explanation.{current_language()}.md"
        source = translated if translated.is_file() else self.path / "explanation.md"
        text = source.read_text(encoding="utf-8")
        return join_soft_breaks(text.split("\n", 1)[1] if text.startswith(SOURCE_NOTE) else text)

    def scripts(self) -> list[Path]:
        """Every Python script the lesson ships (examples, exercises), for reading and for tests."""
        return sorted(self.path.glob("*.py"))


def lessons_root() -> Path:
    return Path(str(resources.files("mgtutor.lessons")))


def _check(data: dict[str, Any]) -> Check:
    params = {k: v for k, v in data.items() if k not in ("kind", "says")}
    return Check(kind=data["kind"], says=Said(data["says"]), params=params)


def _step(folder: Path, data: dict[str, Any], default_name: str) -> Step:
    script = folder / data["script"]
    if not script.is_file():
        raise LessonError(f"{folder.name}: step script {data['script']} is missing")
    return Step(
        name=data.get("name", default_name), title=Said(data.get("title", default_name)), script=script,
        args=tuple(str(a) for a in data.get("args", ())), nproc=int(data.get("nproc", 2)),
        gpu_only=bool(data.get("gpu_only", False)), min_gpus=int(data.get("min_gpus", 0)),
        requires=tuple(data.get("requires", ())), env={k: str(v) for k, v in data.get("env", {}).items()},
        checks=tuple(_check(c) for c in data.get("checks", ())), measures=tuple(data.get("measures", ())),
        timeout_s=float(data.get("timeout_s", 120)),
    )


def load_lesson(folder: Path, number: int) -> Lesson:
    try:
        data = json.loads((folder / "lesson.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise LessonError(f"{folder.name}: lesson.json does not load ({exc})") from exc
    if data.get("id") != folder.name:
        raise LessonError(f"{folder.name}: lesson.json says id {data.get('id')!r}")
    steps = tuple(_step(folder, s, f"step{i + 1}") for i, s in enumerate(data.get("steps", ())))
    exercise = None
    if "exercise" in data:
        ex = data["exercise"]
        step = _step(folder, {"name": "exercise", "title": N_("your fix"), **ex["run"], "script": ex["solution"]},
                     "exercise")
        exercise = Exercise(task=_(ex["task"]), broken=folder / ex["broken"], solution=step.script,
                            workspace_name=ex.get("workspace_name", f"{folder.name}.py"), step=step,
                            hints=tuple(_(hint) for hint in ex.get("hints", ())))
        if not exercise.broken.is_file():
            raise LessonError(f"{folder.name}: exercise script {ex['broken']} is missing")
    return Lesson(
        id=data["id"], number=number, title=_(data["title"]), goal=_(data.get("goal", "")), path=folder,
        prerequisites=tuple(data.get("prerequisites", ())), steps=steps,
        example=folder / data.get("example", steps[0].script.name if steps else "example.py"),
        exercise=exercise, see_also=tuple(data.get("see_also", ())),
    )


def all_lessons() -> tuple[Lesson, ...]:
    """The 16 lessons in path order, their words in the current language."""
    return _lessons_in(current_language())


@lru_cache(maxsize=4)
def _lessons_in(language: str) -> tuple[Lesson, ...]:
    root = lessons_root()
    return tuple(load_lesson(root / lesson_id, n) for n, lesson_id in enumerate(PATH, start=1))


def get_lesson(ref: str) -> Lesson:
    """A lesson by id, by number ("5", "05") or by unique id prefix."""
    lessons = all_lessons()
    if ref.isdigit() and 1 <= int(ref) <= len(lessons):
        return lessons[int(ref) - 1]
    matches = [lesson for lesson in lessons if lesson.id == ref] or \
              [lesson for lesson in lessons if lesson.id.startswith(ref)]
    if len(matches) != 1:
        raise LessonError(_("no lesson {ref!r}: `mgtutor lessons list` shows the ids (e.g. {example})").format(
            ref=ref, example="05-distributed-sampler"))
    return matches[0]


def next_lesson(lesson_id: str) -> Lesson | None:
    ids = list(PATH)
    index = ids.index(lesson_id) + 1
    return all_lessons()[index] if index < len(ids) else None
