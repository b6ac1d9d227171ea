"""Lessons mode through Textual's Pilot: lesson 5 end to end — the broken exercise fails its check
and says why, the fixed one passes, and the progress is there after a restart."""
from __future__ import annotations

import pytest
from textual.widgets import ListItem, Log, Static, TabbedContent

from mgtutor.lessons.loader import get_lesson
from mgtutor.lessons.progress import Progress, workspace_copy
from mgtutor.tui.app import MgTutorApp
from mgtutor.tui.screens.lessons import LessonsScreen
from tests.helpers import wait_for_app


async def wait_idle(pilot, screen: LessonsScreen, limit: float = 300.0) -> None:
    await wait_for_app(pilot, lambda: not screen.busy, limit, interval=0.2, what="the lesson run to finish")
    await pilot.pause(0.2)


def plain(renderable) -> str:
    """The words on screen of what a Static shows: Text, Syntax or a Group of them."""
    if hasattr(renderable, "renderables"):
        return "\n".join(plain(part) for part in renderable.renderables)
    if hasattr(renderable, "code"):
        return renderable.code
    return getattr(renderable, "plain", str(renderable))


def text_of(screen: LessonsScreen, selector: str) -> str:
    return plain(screen.query_one(selector, Static).content)


@pytest.mark.integration
@pytest.mark.slow
async def test_lesson5_broken_then_fixed_then_resumed(monkeypatch):
    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")
    lesson = get_lesson("05-distributed-sampler")
    app = MgTutorApp()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("l")
        screen = app.screen
        assert isinstance(screen, LessonsScreen) and screen.lesson.id == "01-check-gpus"
        for _ in range(4):
            await pilot.press("n")
        assert screen.lesson.id == lesson.id
        assert "DistributedSampler" in text_of(screen, "#lesson-status") or screen.lesson.title in text_of(screen, "#lesson-status")

        await pilot.press("e")  # no terminal to hand to an editor here: it says where the file is
        await pilot.pause()
        copy = workspace_copy(lesson)
        assert copy.read_text() == lesson.exercise.broken.read_text()

        await pilot.press("c")
        await wait_idle(pilot, screen)
        checks = text_of(screen, "#lesson-checks")
        assert "✗ failed" in checks and "every rank trains on the same data" in checks
        assert screen.query_one("#lesson-tabs", TabbedContent).active == "tab-checks"
        log_lines = screen.query_one("#lesson-log", Log).lines
        assert any(line.startswith("r1│ ") for line in log_lines), log_lines[-20:]
        assert not Progress().done(lesson.id)

        await pilot.press("i")
        assert lesson.hints[0] in text_of(screen, "#lesson-exercise")

        copy.write_text(lesson.exercise.solution.read_text())  # the learner's fix
        await pilot.press("c")
        await wait_idle(pilot, screen)
        checks = text_of(screen, "#lesson-checks")
        assert "✓ passed" in checks and "disjoint shards" in checks, checks
        assert Progress().done(lesson.id)
        assert str(screen.query_one(f"#item-{lesson.id}", ListItem).query_one(Static).render()).startswith("✓")

    restarted = MgTutorApp()
    async with restarted.run_test(size=(120, 40)) as pilot:
        await pilot.press("l")
        screen = restarted.screen
        assert screen.lesson.id == lesson.id  # resumes where the learner was
        assert "✓ done" in text_of(screen, "#lesson-status")
        assert "1/16 lessons done" in text_of(screen, "#lesson-status")
        assert str(screen.query_one(f"#item-{lesson.id}", ListItem).query_one(Static).render()).startswith("✓")
        assert "✓ passed" in text_of(screen, "#lesson-checks")
        assert "Hint 1/3" in text_of(screen, "#lesson-exercise")  # the hint shown before stays shown


async def test_lessons_mode_shows_the_path_text_and_code():
    app = MgTutorApp()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("l")
        screen = app.screen
        assert len(screen.query(ListItem)) == 16
        await pilot.press("n", "n")
        assert screen.lesson.id == "03-dataparallel"
        assert "GPU only" in text_of(screen, "#lesson-status")
        assert "DataParallel" in text_of(screen, "#lesson-code")
        await pilot.press("p")
        assert screen.lesson.id == "02-single-gpu-baseline"
        await pilot.press("i")  # no exercise: says so, shows no hint
        assert "no exercise" in text_of(screen, "#lesson-exercise")


async def test_open_lesson_from_another_mode_and_from_lessons():
    app = MgTutorApp()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("m")  # a failure banner in Monitor links to its lesson
        await pilot.pause()
        app.open_lesson("14-when-it-goes-wrong")
        await pilot.pause(0.3)
        assert app.current_mode == "lessons"
        assert app.screen.lesson.id == "14-when-it-goes-wrong"
        app.open_lesson("05-distributed-sampler")  # already in Lessons
        await pilot.pause(0.3)
        assert app.screen.lesson.id == "05-distributed-sampler"
        assert app.screen.query_one("#lesson-list").index == 4
