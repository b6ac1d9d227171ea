"""The Runs screen with more runs than one page holds says so and pages through them (issue 27 item 13)."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from textual.widgets import DataTable, Static

from mgtutor.training.runs.records.record import runs_root
from mgtutor.tui.screens.runs import PAGE, short_id as short
from tests.helpers import wait_for_app
from tests.monitor_helpers import make_app

FIXTURE = Path(__file__).parent / "data" / "monitor_runs" / "20260101-000000-train-tinycnn-f1x7"


def make_runs(count: int) -> list[str]:
    """`count` records (only their meta.json: each reads as a lost run), ids newest last."""
    ids = [f"20260101-{i // 3600:02d}{i // 60 % 60:02d}{i % 60:02d}-train-tinycnn-{i:04x}" for i in range(count)]
    for run_id in ids:
        (runs_root() / run_id).mkdir(parents=True)
        shutil.copy(FIXTURE / "meta.json", runs_root() / run_id / "meta.json")
    return ids


@pytest.mark.integration
async def test_three_hundred_runs_are_shown_a_page_at_a_time_and_the_screen_says_so(monkeypatch):
    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")
    ids = make_runs(PAGE + 100)
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("r")
        table = app.screen.query_one("#runs-table", DataTable)
        header = app.screen.query_one("#runs-root", Static)
        await wait_for_app(pilot, lambda: table.row_count > 0, 30, what="the runs table")
        assert table.row_count == PAGE
        assert f"runs 1–{PAGE} of {PAGE + 100}" in str(header.render()) and "] older" in str(header.render())
        assert table.get_row_at(0)[0] == short(ids[-1])  # newest first

        await pilot.press("right_square_bracket")
        await wait_for_app(pilot, lambda: table.row_count == 100, 30, what="the older page")
        assert f"runs {PAGE + 1}–{PAGE + 100} of {PAGE + 100}" in str(header.render())
        assert "[ newer" in str(header.render()) and "] older" not in str(header.render())
        assert table.get_row_at(99)[0] == short(ids[0])  # the oldest run is reachable

        await pilot.press("left_square_bracket")
        await wait_for_app(pilot, lambda: table.row_count == PAGE, 30, what="the newer page again")
        assert f"runs 1–{PAGE}" in str(header.render())


async def test_a_page_that_holds_every_run_needs_no_word_about_pages(monkeypatch):
    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")
    make_runs(3)
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("r")
        table = app.screen.query_one("#runs-table", DataTable)
        await wait_for_app(pilot, lambda: table.row_count == 3, 30, what="the runs table")
        assert "of 3" not in str(app.screen.query_one("#runs-root", Static).render())
