"""Lessons at 80×24 (issue 45, item 4): the footer and `?` say how to switch the Lesson/Code/Exercise/
Run/Checks tabs; code is wrapped in its pane, never cut at 80 columns; after a restart the header never
shows another lesson's title over this lesson's text; a hint follows the check that failed."""
from __future__ import annotations

import re
import time

import pytest
from textual.css.query import NoMatches
from textual.widgets import Static, TabbedContent
from textual.widgets._markdown import MarkdownParagraph
from textual.widgets._footer import FooterKey

from mgtutor.lessons.loader import get_lesson
from mgtutor.lessons.progress import Progress, ensure_workspace
from mgtutor.tui.app import MgTutorApp
from mgtutor.tui.screens.help import HelpScreen
from mgtutor.tui.screens.lessons import LessonsScreen
from tests.screen_text import plain
from tests.test_tui_wording_80x24 import open_lessons

TABS = ["tab-text", "tab-code", "tab-exercise", "tab-run", "tab-checks"]


def squeezed(text: str) -> str:
    return "".join(text.split())


def drawn_lines(widget: Static) -> str:
    """Every row the widget draws at its width (those scrolled out of the pane too)."""
    return "\n".join(strip.text for strip in widget.render_lines(widget.region.reset_offset))


@pytest.mark.integration
async def test_the_footer_and_help_say_how_to_switch_tabs_and_the_keys_do(monkeypatch):
    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")
    app = MgTutorApp()
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_lessons(pilot)
        footer = {key.key_display: key.description for key in screen.query(FooterKey) if key.region.width}
        assert footer.get("]") == "Tab", footer
        assert max(key.region.right for key in screen.query(FooterKey) if key.region.width) <= 80
        tabs = screen.query_one("#lesson-tabs", TabbedContent)
        assert tabs.active == "tab-text"
        for wanted in TABS[1:] + TABS[:1]:  # round the five tabs and back to the text
            await pilot.press("right_square_bracket")
            assert tabs.active == wanted
        await pilot.press("left_square_bracket")
        assert tabs.active == "tab-checks"
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        said = " ".join(str(app.screen.query_one("#help-text", Static).render()).split())
        assert "] the next tab: Lesson, Code, Exercise, Run, Checks" in said
        assert "[ Previous tab" in said


@pytest.mark.integration
async def test_code_and_exercise_code_wrap_in_the_pane_at_80_columns(monkeypatch):
    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")
    lesson = get_lesson("05-distributed-sampler")
    copy = ensure_workspace(lesson)
    progress = Progress()
    progress.set_current(lesson.id)
    app = MgTutorApp()
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_lessons(pilot)
        for tab, selector, source in (("tab-code", "#lesson-code", lesson.example),
                                      ("tab-exercise", "#lesson-exercise", copy)):
            screen.query_one("#lesson-tabs", TabbedContent).active = tab
            await pilot.pause()
            widget = screen.query_one(selector, Static)
            long_lines = [line for line in source.read_text().splitlines() if len(line) > widget.region.width]
            assert long_lines, f"{source.name} has no line wider than the pane: this test shows nothing"
            shown = squeezed(drawn_lines(widget))
            for line in long_lines:
                assert squeezed(line) in shown.replace("│", ""), line


class HeaderAndText:
    """At every message the app handles (a far finer grain than pauses): the lesson number in the header
    (the status line) and the one in the lesson text below it, while the text is shown."""

    def __init__(self, app: MgTutorApp) -> None:
        self.app = app
        self.seen: list[tuple[int | None, int | None]] = []
        self.said: dict[int, tuple[object, int | None]] = {}  # a header's content or a paragraph → its number
        # (kept alive here, so that no later object takes its id)

    def number(self, thing: object, pattern: str) -> int | None:
        if id(thing) not in self.said:
            found = re.search(pattern, plain(thing.render() if isinstance(thing, MarkdownParagraph) else thing))
            self.said[id(thing)] = (thing, int(found.group(1)) if found else None)
        return self.said[id(thing)][1]

    def __call__(self, _message: object) -> None:
        screen = self.app.screen_stack[-1] if self.app.screen_stack else None
        if not isinstance(screen, LessonsScreen) or not screen.is_mounted:
            return
        try:
            markdown = screen.get_widget_by_id("lesson-markdown")
            status = screen.get_widget_by_id("lesson-status")
        except NoMatches:
            return
        first = markdown.children[0] if markdown.children else None
        if not markdown.display or not isinstance(first, MarkdownParagraph):
            return
        pair = (self.number(status.content, r"^(\d\d) "), self.number(first, r"Lesson (\d+) of 16"))
        if not self.seen or self.seen[-1] != pair:
            self.seen.append(pair)

    async def until_shown(self, pilot, lesson: int, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while not self.seen or self.seen[-1] != (lesson, lesson):
            assert time.monotonic() < deadline, f"lesson {lesson}'s text never showed: {self.seen}"
            await pilot.pause(0.05)


@pytest.mark.integration
async def test_after_a_restart_the_header_never_shows_another_lessons_title_over_the_text(monkeypatch):
    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")
    Progress().set_current("05-distributed-sampler")
    app = MgTutorApp()
    watch = HeaderAndText(app)
    async with app.run_test(size=(80, 24), message_hook=watch) as pilot:
        await pilot.press("l")
        await watch.until_shown(pilot, 5)
        await pilot.press("n", "n", "n")  # quickly on: the text follows, never under another's title
        await watch.until_shown(pilot, 8)
    assert all(header == text for header, text in watch.seen), watch.seen


def saved_check(lesson_id: str, passed: list[bool]) -> None:
    progress = Progress()
    lesson = get_lesson(lesson_id)
    checks = [{"says": c.says, "passed": ok, "detail": ""} for c, ok in zip(lesson.exercise.step.checks, passed)]
    progress.record_check(lesson_id, "failed", [{"step": "exercise", "status": "failed", "reason": "",
                                                 "checks": checks}])


@pytest.mark.integration
async def test_the_first_hint_is_the_one_for_the_check_that_failed(monkeypatch):
    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")
    lesson = get_lesson("05-distributed-sampler")
    Progress().set_current(lesson.id)
    saved_check(lesson.id, [True, True, False])  # the shards are right, epoch 1 repeats epoch 0
    app = MgTutorApp()
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_lessons(pilot)
        await pilot.press("i")
        await pilot.pause()
        exercise = squeezed(plain(screen.query_one("#lesson-exercise", Static).content))
        assert squeezed("Hint 3/3: " + lesson.hints[2]) in exercise and "Hint1/3" not in exercise
        notes = [n.message for n in app._notifications]
        assert any("for the check that failed (epoch 1 is shuffled differently" in n for n in notes), notes
        await pilot.press("i")  # then the others, in order
        assert Progress().hints_seen(lesson.id) == [1, 3]
