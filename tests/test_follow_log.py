"""The Monitor's log view: long lines wrap to the pane, and following the newest line survives the
pane shrinking under it (issue 27 items 9 and 11); scrolling away pauses it, visibly."""
from __future__ import annotations

from rich.cells import cell_len
from textual.app import App, ComposeResult
from textual.widgets import Static

from mgtutor.tui.widgets.follow_log import INDENT, FollowLog, wrap_line
from mgtutor.tui.widgets.rank_logs import RankLogs

TRAINER_LINE = "r0│ step   4900/100000  epoch 1  loss 0.2748       1,274 samples/s/rank  data wait   1%  mem 689/689 MiB"


def test_a_long_line_wraps_at_spaces_and_keeps_every_character():
    rows = wrap_line(TRAINER_LINE, 40)
    assert len(rows) > 1 and all(cell_len(row) <= 40 for row in rows)
    assert all(row.startswith(INDENT) for row in rows[1:])
    assert "".join(rows).replace(" ", "") == TRAINER_LINE.replace(" ", "")
    assert rows[0].endswith("loss") and rows[1].startswith(INDENT + "0.2748 ")  # at a space, not in a word
    assert wrap_line("short", 40) == ["short"]
    assert wrap_line("x" * 100, 40)[0] == "x" * 40  # no space: the word is cut, not lost


def test_wide_characters_wrap_by_cells():
    line = "训练" * 40  # 160 cells
    rows = wrap_line(line, 30)
    assert all(cell_len(row) <= 30 for row in rows)
    assert "".join(row.removeprefix(INDENT) for row in rows) == line


class LogApp(App[None]):
    CSS = "#above { height: 1; }"

    def compose(self) -> ComposeResult:
        yield Static("", id="above")
        yield RankLogs(id="logs")


async def test_following_survives_the_pane_shrinking_and_nothing_is_cut():
    app = LogApp()
    async with app.run_test(size=(80, 24)) as pilot:
        logs = app.query_one(RankLogs)
        log = logs.log_view
        await pilot.pause()
        logs.add_lines([(0, "stdout", f"line {i} " + "x " * 60) for i in range(300)])
        app.query_one("#above").styles.height = 8  # the meters and charts arrive after the old lines
        await pilot.pause()
        logs.add_lines([(0, "stdout", "the newest line")])
        await pilot.pause()
        assert log.scroll_offset.y == log.max_scroll_y
        assert log.lines[-1].endswith("the newest line")
        assert log.virtual_size.width <= log.scrollable_content_region.width  # wrapped: nothing past the edge


async def test_scrolling_up_pauses_visibly_and_end_follows_again():
    app = LogApp()
    async with app.run_test(size=(80, 24)) as pilot:
        logs = app.query_one(RankLogs)
        log = logs.log_view
        log.focus()
        logs.add_lines([(0, "stdout", f"line {i}") for i in range(200)])
        await pilot.pause()
        await pilot.press("pageup")
        await pilot.pause()
        assert not log.auto_scroll and logs.has_class("-paused")
        top = log.scroll_offset.y
        logs.add_lines([(0, "stdout", "while paused")])
        await pilot.pause()
        assert log.scroll_offset.y == top
        await pilot.press("end")
        await pilot.pause()
        assert log.auto_scroll and not logs.has_class("-paused")
        logs.add_lines([(0, "stdout", "after end")])
        await pilot.pause()
        assert log.scroll_offset.y == log.max_scroll_y


async def test_a_search_jump_lands_on_its_line_when_lines_wrap():
    app = LogApp()
    async with app.run_test(size=(60, 24)) as pilot:
        logs = app.query_one(RankLogs)
        log = logs.log_view
        await pilot.pause()
        logs.add_lines([(0, "stdout", f"line {i} " + "y " * 40) for i in range(100)])
        logs.search_text = "line 37 "
        assert logs.find_next().endswith("line 38")  # the 38th line, 1-based
        await pilot.pause()
        shown = log.lines[log.scroll_offset.y:log.scroll_offset.y + log.size.height]
        assert any("line 37 " in row for row in shown)
