"""Chinese at 80×24 as the terminal shows it (issue 47, "Layout"): every lesson's text, a hang report and the
doctor's report, read row by row from the screen: no row starts with closing punctuation, no space stands
between two Chinese characters where the source has none (a line break of the lesson file, a separator
joined in English), no name that fits a row is cut in two, and no English separator (". ", ", ") stands
between Chinese pieces."""
from __future__ import annotations

import asyncio
import re

import pytest
from textual.widget import Widget

from mgtutor.lessons.loader import all_lessons
from mgtutor.training.foundation.i18n import cell_width
from mgtutor.training.foundation.linebreak import CLOSING
from mgtutor.tui.app import MgTutorApp
from mgtutor.tui.messages import ShowLesson
from tests.test_i18n_tui import in_chinese  # noqa: F401  (a fixture)
from tests.test_zh_every_mode import no_english, settle

CJK = "\u3000-\u303f\u4e00-\u9fff\uff00-\uffef"
SPACED = re.compile(rf"[{CJK}] +[{CJK}]")
ENGLISH_SEPARATOR = re.compile(rf"[{CJK}][.,;] ?[{CJK}]")
NAME = re.compile(r"[A-Za-z_][\w.=/-]*\w(?:\([^()\s]*\))?")  # an identifier, a call, a flag's value, a path
MARKUP = re.compile(r"[*`]|\[([^\]]*)\]\([^)]*\)")
CLOSING_CJK = {mark for mark in CLOSING if cell_width(mark) == 2}  # "! " at a row's start is doctor's warn mark
BORDER = "│▎▊▌▐▕▔▁▇▆▅▄▃▂█ "  # box edges and scrollbars around a pane's words


def pane_rows(screen, widget: Widget) -> list[str]:
    """The rows of the screen inside the widget's region, without the edges and scrollbar around them."""
    region = widget.region
    strips = screen._compositor.render_strips()[region.y:region.bottom]
    return [strip.crop(region.x, region.right).text.strip(BORDER) for strip in strips]  # crop counts cells


def faults(shown: list[str], source: str) -> dict[str, list[str]]:
    """What is laid out wrong in `shown` (rows) for text from `source`."""
    plain = MARKUP.sub(lambda found: found.group(1) or "", source)
    written = {pair for line in plain.splitlines() for pair in SPACED.findall(line)}
    width, joined = max((cell_width(row) for row in shown), default=0), "".join(shown)
    names = {name for name in NAME.findall(plain) if cell_width(name) < width - 2 and name in joined}
    return {"starts with closing punctuation": [row for row in shown if row[:1] in CLOSING_CJK],
            "a space between Chinese characters": [row for row in shown
                                                   if set(SPACED.findall(row)) - written],
            "an English separator between Chinese": [row for row in shown if ENGLISH_SEPARATOR.search(row)],
            "a name cut in two": sorted(name for name in names if not any(name in row for row in shown)),
            "Markdown shown as it is written": [row for row in shown if "**" in row]}


def no_faults(found: dict[str, list[str]]) -> bool:
    return not any(found.values())


async def scrolled_rows(pilot, scroller: Widget) -> list[str]:
    """Every row of a scrolling pane, read a page at a time from the top (rows seen twice count once)."""
    seen: list[str] = []
    scroller.scroll_home(animate=False, immediate=True)
    await pilot.pause()
    for top in range(0, scroller.max_scroll_y + scroller.region.height, max(scroller.region.height - 1, 1)):
        scroller.scroll_to(y=top, animate=False, immediate=True)
        await pilot.pause()
        seen += [row for row in pane_rows(pilot.app.screen, scroller) if row and row not in seen[-40:]]
    return seen


HALVES = [range(0, 8), range(8, 16)]  # one app for eight lessons: its start and the Lessons screen's first draw
# The first lesson and two with an exercise, hints and GPU steps: their Lesson, Exercise and Checks tabs are read
# whole for English left too (test_zh_every_mode.py's test_lessons_every_tab_but_the_code was this walk's twin).
EVERY_TAB = (0, 1, 14, 15)


@pytest.mark.integration
@pytest.mark.sweep
@pytest.mark.parametrize("lessons", HALVES, ids=["1-8", "9-16"])
async def test_every_lessons_text_at_80x24_breaks_as_chinese(in_chinese, lessons):
    from mgtutor.tui.widgets.lesson_text import lesson_markdown

    app = MgTutorApp()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("l")
        await settle(pilot)
        screen = app.screen
        tabs = screen.query_one("#lesson-tabs")
        found = {}
        for index in lessons:
            lesson = screen.lessons[index]
            if index == lessons[0]:
                screen.post_message(ShowLesson(lesson.id))  # as a fix card's link does: straight there
            else:
                await pilot.press("n")  # then on, as a reader goes
            await settle(pilot)
            assert screen.lessons.index(screen.lesson) == index
            shown = await scrolled_rows(pilot, screen.query_one("#lesson-text"))
            assert len(shown) > 10 and lesson.title[:4] in "".join(shown)
            found[lesson.id] = faults(shown, lesson_markdown(lesson, len(all_lessons())))
            if index in EVERY_TAB:  # read as it opens: the text at its top
                screen.query_one("#lesson-text").scroll_home(animate=False, immediate=True)
                for pane in ("tab-text", "tab-exercise", "tab-checks"):
                    tabs.active = pane
                    await pilot.pause()
                    no_english(screen)
                tabs.active = "tab-text"
                await pilot.pause()
        assert {lesson: said for lesson, said in found.items() if not no_faults(said)} == {}


@pytest.mark.integration
async def test_a_hang_report_at_80x24_breaks_as_chinese(in_chinese):
    """The Monitor's hang panel, opened on a saved capture's report: no English but the script's own lines (this
    was test_zh_every_mode.py's test_the_monitor_hang_panel, on the same screen), and its rows broken as Chinese."""
    from mgtutor.diagnostics.failures.hang.analyse import analyse_capture
    from mgtutor.tui.widgets.hang_panel import HangPanel
    from tests.helpers import wait_for_app
    from tests.snapshots.monitor_fixture_app import FixtureApp, show_fixture_run
    from tests.test_hang_panel import DATA as HANG

    report = analyse_capture(HANG, world_size=2)
    code = tuple(w.where.source for w in report.where.values() if w.where.source)  # the script's own lines
    app = FixtureApp()
    async with app.run_test(size=(80, 24)) as pilot:
        await show_fixture_run(pilot)
        screen = app.screen
        await asyncio.to_thread(screen.post_hang, screen.record, report)
        panel = screen.query_one(HangPanel)
        await wait_for_app(pilot, lambda: panel.report is not None, 10, what="the hang panel")
        panel.collapsed = False
        await settle(pilot)
        text = no_english(screen, allow=("NVIDIA H200",) + code)
        assert "卡住" in panel.title and "rank 1:" in text
        shown = pane_rows(screen, panel)
        assert any("卡住" in row for row in shown) and any("解决" in row for row in shown), shown
        said = "\n".join([report.said.get("summary", ""), report.said.get("fix", "")])
        assert "。 " not in said and no_faults(faults(shown, report.text())), faults(shown, report.text())


async def test_the_doctors_report_at_80x24_breaks_as_chinese(in_chinese):
    from tests.snapshots.test_screens_zh_80x24 import FixtureDiagnosticsApp

    app = FixtureDiagnosticsApp()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("d")
        await settle(pilot)
        screen = app.screen
        while screen.doctor_report is None:
            await pilot.pause()
        await settle(pilot)
        scroller = screen.query_one("#doctor-checks").parent
        shown = await scrolled_rows(pilot, scroller)
        assert sum(row.startswith(("✓", "!", "✗")) for row in shown) > 5, shown
        source = str(screen.query_one("#doctor-checks").render())
        assert no_faults(faults(shown, source)), faults(shown, source)
