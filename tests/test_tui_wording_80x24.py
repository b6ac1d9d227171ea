"""What a new user saw at 80×24 (issue 27 items 11 and 12): the Lessons Run tab wraps its lines in
the pane, the note after `g` on a lesson with an exercise says the exercise remains, the help
overlay keeps each key's words in their column, and `mgtutor demo` keeps its columns apart."""
from __future__ import annotations

import pytest
from rich.cells import cell_len
from textual.widgets import RichLog, Static

from mgtutor.lessons.runner import StepResult
from mgtutor.tui.app import MgTutorApp
from mgtutor.tui.commands.demo import scenario_table
from mgtutor.tui.screens.help import KEY_COLUMN, HelpScreen
from mgtutor.tui.screens.lessons import LessonsScreen

LONG_LINES = [
    "── Run the script on 2 ranks: 2 rank(s), gloo — 2 CPU ranks on gloo — no NVIDIA GPU (NVML not available)",
    "r0│ [rank 0] step 10/100 loss 2.1021 throughput 1,274 samples/s/rank data wait 1% mem 689 MiB",
]


async def open_lessons(pilot) -> LessonsScreen:
    await pilot.press("l")
    await pilot.pause()
    screen = pilot.app.screen
    assert isinstance(screen, LessonsScreen)
    return screen


@pytest.mark.integration
async def test_the_run_tab_wraps_inside_its_pane_at_80x24(monkeypatch):
    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")
    app = MgTutorApp()
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_lessons(pilot)
        screen.query_one("#lesson-tabs").active = "tab-run"
        await pilot.pause()
        screen._pending.extend(LONG_LINES)  # as the lesson's run thread hands them over
        await pilot.pause(0.3)
        log = screen.query_one("#lesson-log", RichLog)
        width = log.scrollable_content_region.width
        assert width < 60  # the pane beside the lesson list
        assert log.virtual_size.width <= width, (log.virtual_size, width)  # nothing past the pane's edge
        shown = "".join(strip.text for strip in log.lines)
        assert "mem 689 MiB" in shown and "(NVML not available)" in shown


def result(lesson_id: str, status: str) -> StepResult:
    return StepResult(lesson_id, "run", "Run it", "script.py", status)


@pytest.mark.integration
async def test_after_g_a_lesson_with_an_exercise_says_the_exercise_remains(monkeypatch):
    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")
    app = MgTutorApp()
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_lessons(pilot)
        by_id = {lesson.id: lesson for lesson in screen.lessons}
        sampler, ddp = by_id["05-distributed-sampler"], by_id["04-ddp-torchrun"]
        assert sampler.exercise is not None and ddp.exercise is not None
        screen._move(screen.lessons.index(sampler) - screen.lessons.index(screen.lesson))
        screen._finished(sampler, "run", [result(sampler.id, "passed")])
        status = str(screen.query_one("#lesson-status", Static).render())
        assert "exercise" in status and "next lesson" not in status
        assert not screen.progress.done(sampler.id)  # and so it is: undone until the exercise passes

        screen._move(screen.lessons.index(ddp) - screen.lessons.index(screen.lesson))
        screen._finished(ddp, "run", [result(ddp.id, "passed"), result(ddp.id, "skipped")])
        status = str(screen.query_one("#lesson-status", Static).render())
        assert "could not run here" in status and "exercise" in status

        screen._finished(ddp, "check", [result(ddp.id, "passed")])  # c: the exercise passed
        status = str(screen.query_one("#lesson-status", Static).render())
        assert "all checks passed" in status and screen.progress.done(ddp.id)


@pytest.mark.integration
async def test_the_help_overlay_keeps_each_keys_words_in_their_column(monkeypatch):
    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")
    app = MgTutorApp()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("m")
        await pilot.pause()
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        help_text = app.screen.query_one("#help-text", Static)
        lines = str(help_text.render()).splitlines()
        keys = lines[1:lines.index("")]  # the screen's own keys, up to the global ones
        assert any(line.startswith(" " * KEY_COLUMN) for line in keys)  # some words do wrap…
        assert all(line.startswith("  ") for line in keys)  # …and never back under the keys
        assert max(cell_len(line) for line in lines) <= help_text.content_region.width


def test_demo_titles_never_run_into_the_symptom_column():
    lines = scenario_table().splitlines()
    assert lines[0].startswith("scenario")
    column = lines[0].index("symptom")
    assert all(line[column - 2:column] == "  " and line[column] != " " for line in lines)
    assert max(len(line) for line in lines) <= 80
