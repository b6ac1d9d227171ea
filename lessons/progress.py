"""The learner's progress and workspace, kept under $XDG_DATA_HOME/mgtutor/ so they survive restarts.

    progress.json    {"current": id, "language": "zh"|"en", "lessons": {id: {"done", "steps", "hints_seen", "checked", …}}}
                     "checked" keeps each step's title, reason and checks as message ids with their arguments
                     (`Said`), said in the language in force when shown
    workspace/       the learner's copies of the exercise scripts, edited in $EDITOR
"""
from __future__ import annotations

import os
import shutil
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mgtutor.lessons.loader import PATH, Lesson
from mgtutor.training.foundation.i18n import DEFAULT, LANGUAGES, language_from_env, set_language
from mgtutor.training.runs.records.record import read_json, write_json_atomic
from mgtutor.training.foundation.safe_io import private_dir
from mgtutor.training.foundation.said import kept_in_english


GPU_SKIP = "NVIDIA GPU"  # in every skip reason of a step that needs GPUs


def data_home() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "mgtutor"


def workspace_dir() -> Path:
    return data_home() / "workspace"


def progress_path() -> Path:
    return data_home() / "progress.json"


class Progress:
    """Read on creation, written (atomically) on every change."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or progress_path()
        data = read_json(self.path)
        self.data: dict[str, Any] = data if isinstance(data, dict) else {}
        self.data.setdefault("lessons", {})

    def save(self) -> None:
        """0600 in a 0700 folder, like every file mgtutor keeps for itself."""
        private_dir(self.path.parent)
        write_json_atomic(self.path, self.data)

    def lesson(self, lesson_id: str) -> dict[str, Any]:
        return self.data["lessons"].setdefault(lesson_id, {})

    def done(self, lesson_id: str) -> bool:
        return bool(self.data["lessons"].get(lesson_id, {}).get("done"))

    @property
    def current(self) -> str:
        current = self.data.get("current")
        if current in PATH:
            return current
        return next((lid for lid in PATH if not self.done(lid)), PATH[0])

    def set_current(self, lesson_id: str) -> None:
        if self.data.get("current") != lesson_id:
            self.data["current"] = lesson_id
            self.save()

    @property
    def language(self) -> str | None:
        """The language the learner chose in the app ('zh' or 'en'); None: follow the locale."""
        language = self.data.get("language")
        return language if language in LANGUAGES else None

    def set_language(self, language: str) -> None:
        if language not in LANGUAGES:
            raise ValueError(f"language {language!r}: one of {', '.join(LANGUAGES)}")
        if self.data.get("language") != language:
            self.data["language"] = language
            self.save()

    def record_step(self, lesson_id: str, step: str, status: str, run_id: str | None) -> None:
        entry = self.lesson(lesson_id)
        entry.setdefault("steps", {})[step] = {"status": status, "run_id": run_id, "t": time.time()}
        self.save()

    def record_check(self, lesson_id: str, status: str, summary: list[dict[str, Any]]) -> None:
        """status: passed | failed | skipped. A pass marks the lesson done; nothing un-marks it.
        Without GPUs a lesson is done "on CPU" when every step that could run passed and the others
        were skipped only for want of a GPU: otherwise the path could never be finished there."""
        entry = self.lesson(lesson_id)
        entry["checked"] = {"status": status, "t": time.time(), "checks": summary}
        if status == "passed":
            entry["done"] = True
            entry.pop("done_cpu", None)
        elif status == "skipped" and passed_without_gpus(summary) and not entry.get("done"):
            entry["done"] = True
            entry["done_cpu"] = True
        self.save()

    def done_on_cpu(self, lesson_id: str) -> bool:
        """Done with the GPU-only steps skipped (shown "(CPU)")."""
        return bool(self.data["lessons"].get(lesson_id, {}).get("done_cpu"))

    def mark(self, lesson_id: str) -> str:
        """✓ done, ✗ the last check failed, – it ran with steps skipped, blank not checked yet."""
        if self.done(lesson_id):
            return "✓"
        checked = self.data["lessons"].get(lesson_id, {}).get("checked") or {}
        return {"failed": "✗", "skipped": "–"}.get(checked.get("status", ""), " ")

    def hints_shown(self, lesson_id: str) -> int:
        return len(self.hints_seen(lesson_id))

    def hints_seen(self, lesson_id: str) -> list[int]:
        """The numbers (1-based) of the hints shown so far."""
        entry = self.data["lessons"].get(lesson_id, {})
        seen = entry.get("hints_seen")
        if isinstance(seen, list):
            return sorted({n for n in seen if isinstance(n, int) and n > 0})
        return list(range(1, int(entry.get("hints_shown", 0)) + 1))  # kept before hints followed the checks

    def next_hint(self, lesson: Lesson) -> tuple[int, str] | None:
        """The next hint (1-based number, text), one at a time: first those for the checks that failed
        at the last check of the exercise, then the others in order; None when all are shown."""
        seen = set(self.hints_seen(lesson.id))
        wanted = [n for n, _says in failed_check_hints(lesson, self.lesson(lesson.id).get("checked"))]
        number = next((n for n in [*wanted, *range(1, len(lesson.hints) + 1)]
                       if n not in seen and 1 <= n <= len(lesson.hints)), None)
        if number is None:
            return None
        seen.add(number)
        self.lesson(lesson.id).update(hints_seen=sorted(seen), hints_shown=len(seen))
        self.save()
        return number, lesson.hints[number - 1]

    def summary(self) -> tuple[int, int]:
        return sum(self.done(lid) for lid in PATH), len(PATH)


def start_language(flag: str | None = None, environ: Mapping[str, str] | None = None) -> str:
    """The language a command or the app starts in, now in force: `--lang` first, then the choice
    kept with the progress, then the locale (LANGUAGE, LC_ALL, LC_MESSAGES, LANG), else English."""
    if flag:
        return set_language(flag)
    kept = Progress().language
    return set_language(kept or language_from_env(environ) or DEFAULT)


def failed_check_hints(lesson: Lesson, checked: Any) -> list[tuple[int, str]]:
    """(hint number, what the check says) for each check of the exercise that failed in the saved check
    record, in the checks' order: a check names the hints that help when it fails (lesson.json's
    `hints_if_failed`). The record's checks are the exercise step's, in the same order."""
    if lesson.exercise is None or not isinstance(checked, dict):
        return []
    steps = [s for s in checked.get("checks") or [] if isinstance(s, dict) and s.get("step") == lesson.exercise.step.name]
    results = steps[-1].get("checks") if steps else None
    out: list[tuple[int, str]] = []
    for check, result in zip(lesson.exercise.step.checks, results if isinstance(results, list) else []):
        if isinstance(result, dict) and result.get("passed") is False:
            out += [(n, check.says) for n in check.params.get("hints_if_failed", ()) if isinstance(n, int)]
    return out


def passed_without_gpus(summary: list[dict[str, Any]]) -> bool:
    """Something ran, all that ran passed, and each skipped step was skipped for lack of a GPU
    (lessons.runner.skip_reason says "NVIDIA GPU" then in English; a missing package is not such a reason)."""
    ran = [step for step in summary if step.get("status") != "skipped"]
    skipped = [step for step in summary if step.get("status") == "skipped"]
    return (bool(ran) and all(step.get("status") == "passed" for step in ran)
            and all(GPU_SKIP in kept_in_english(step.get("reason")) for step in skipped))


def workspace_copy(lesson: Lesson) -> Path | None:
    if lesson.exercise is None:
        return None
    return workspace_dir() / lesson.exercise.workspace_name


def ensure_workspace(lesson: Lesson, reset: bool = False) -> Path:
    """The learner's copy of the broken exercise; created from the lesson when missing (or on reset)."""
    if lesson.exercise is None:
        raise ValueError(f"lesson {lesson.id} has no exercise")
    target = workspace_copy(lesson)
    assert target is not None
    if reset or not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(lesson.exercise.broken, target)
    return target
