"""Lessons mode through Textual's Pilot: lesson 5 end to end — the broken exercise fails its check
and says why, the fixed one passes, and the progress is there after a restart.

The walk checks what the screen does with a check's run (its log, its verdict, the progress), not the
lesson's scripts (test_lessons_runs.py runs them for real): its two checks run, through the torch-free
stand-in torchrun, ranks that print what the ranks of the real broken and fixed exercise printed (the
CLI's checks of lesson 05, the `lesson05_cli` fixture of tests/lesson_runs.py, made once per worker)."""
from __future__ import annotations

import pytest
from textual.widgets import ListItem, RichLog, Static, TabbedContent

from mgtutor.lessons.loader import get_lesson
from mgtutor.lessons.progress import Progress, workspace_copy
from mgtutor.tui.app import MgTutorApp
from mgtutor.tui.messages import OpenLesson
from mgtutor.tui.screens.lessons import LessonsScreen
from tests.helpers import wait_for_app
from tests.lesson_runs import GROUP, lesson05_cli, replay  # noqa: F401  (a fixture)


async def wait_idle(pilot, screen: LessonsScreen, limit: float = 300.0) -> None:
    await wait_for_app(pilot, lambda: not screen.busy, limit, interval=0.2, what="the lesson run to finish")
    await pilot.pause(0.2)


async def wait_lesson(pilot, app: MgTutorApp, lesson_id: str, limit: float = 30.0) -> None:
    await wait_for_app(pilot, lambda: getattr(getattr(app.screen, "lesson", None), "id", None) == lesson_id, limit,
                       what=f"lesson {lesson_id} on screen")


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
@GROUP
async def test_lesson5_broken_then_fixed_then_resumed(monkeypatch, standin_torchrun, lesson05_cli):
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
        assert lesson05_cli.broken.workspace == copy.read_text()  # what the recorded broken check ran
        copy.write_text(replay(lesson05_cli.broken.record))  # its ranks' words, without torch

        await pilot.press("c")
        await wait_idle(pilot, screen)
        checks = text_of(screen, "#lesson-checks")
        assert "✗ failed" in checks and "every rank trains on the same data" in checks
        assert screen.query_one("#lesson-tabs", TabbedContent).active == "tab-checks"
        log_lines = [strip.text for strip in screen.query_one("#lesson-log", RichLog).lines]
        assert any(line.startswith("r1│ ") for line in log_lines), log_lines[-20:]
        assert not Progress().done(lesson.id)

        await pilot.press("i")
        assert lesson.hints[0] in text_of(screen, "#lesson-exercise")

        copy.write_text(replay(lesson05_cli.solution.record))  # the learner's fix: the solution's ranks' words
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


@pytest.mark.integration
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


@pytest.mark.integration
async def test_open_lesson_from_another_mode_and_from_lessons():
    app = MgTutorApp()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("m")  # a failure banner in Monitor links to its lesson: the screen posts OpenLesson
        await pilot.pause()
        app.screen.post_message(OpenLesson("14-when-it-goes-wrong"))
        await wait_lesson(pilot, app, "14-when-it-goes-wrong")
        assert app.current_mode == "lessons"
        app.screen.post_message(OpenLesson("05-distributed-sampler"))  # already in Lessons
        await wait_lesson(pilot, app, "05-distributed-sampler")
        assert app.screen.lesson.id == "05-distributed-sampler"
        assert app.screen.query_one("#lesson-list").index == 4


@pytest.mark.integration
async def test_at_80x24_next_lesson_has_its_own_run_log_and_says_each_key_once():
    app = MgTutorApp()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("l")
        screen = app.screen
        await wait_lesson(pilot, app, screen.lesson.id)
        screen.query_one("#lesson-tabs", TabbedContent).active = "tab-run"
        await pilot.pause()
        log = screen.query_one("#lesson-log", RichLog)
        log.write("[rank 0] " + "a long line of lesson output " * 6)
        await pilot.pause()
        assert len(log.lines) > 1  # wrapped at the pane's width, not cut
        status = text_of(screen, "#lesson-status")
        assert status.count("g run") == 1, status  # (it said "g runs the steps · g run")
        first = screen.lesson.id
        await pilot.press("n")
        await pilot.pause()
        assert screen.lesson.id != first and not log.lines  # the previous lesson's output is gone
