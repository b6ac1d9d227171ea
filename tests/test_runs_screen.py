"""Runs mode: open a past run in the monitor, and reattach to a run that is still going."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from mgtutor.training.runs.launch.launcher import LaunchSpec, launch
from mgtutor.training.runs.launch.procs import run_processes
from mgtutor.training.runs.records.record import runs_root
from mgtutor.tui.screens.monitor import MonitorScreen
from mgtutor.tui.screens.runs import run_page
from mgtutor.tui.widgets.rank_logs import RankLogs
from tests.helpers import wait_for_app
from tests.monitor_helpers import EVENT_SCRIPT, make_app

FIXTURE = Path(__file__).parent / "data" / "monitor_runs" / "20260101-000000-train-tinycnn-f1x7"


@pytest.fixture(autouse=True)
def no_nvml(monkeypatch):
    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")


async def open_in_monitor(pilot, run_id: str) -> MonitorScreen:
    await pilot.press("r")
    table = pilot.app.screen.query_one("#runs-table")
    await wait_for_app(pilot, lambda: table.row_count > 0, 30, what="the runs table")
    table.move_cursor(row=table.get_row_index(run_id))
    table.focus()
    await pilot.press("enter")
    await wait_for_app(pilot, lambda: isinstance(pilot.app.screen, MonitorScreen), 10, what="monitor mode")
    return pilot.app.screen


@pytest.mark.integration
async def test_a_past_run_opens_from_its_files():
    runs_root().mkdir(parents=True)
    shutil.copytree(FIXTURE, runs_root() / FIXTURE.name)
    app = make_app()
    async with app.run_test(size=(100, 40)) as pilot:
        screen = await open_in_monitor(pilot, FIXTURE.name)
        await wait_for_app(pilot, lambda: screen.state is not None and screen.state.done, 30, what="the replay")
        await pilot.pause(0.2)
        assert screen.record.run_id == FIXTURE.name
        assert screen.state.phase == "lost"  # no result.json and no supervisor: the record says so
        assert "without a result" in screen.query_one("#failure-banner").plain
        assert screen.query_one("#training-charts").points == 120
        logs = screen.query_one(RankLogs)
        assert logs.buffers["rank1"].total == 9  # 8 stdout lines + 1 stderr line
        assert not any("\x1b" in line for line in logs.buffers["all"].lines)


@pytest.mark.integration
async def test_reattach_to_a_run_started_elsewhere_and_stop_it(write_script, standin_torchrun):
    """The ranks through the stand-in torchrun (the reattach and the stop are mgtutor's; attaching to a run on the
    real torchrun: tests/test_run_control.py::test_attach_follows_a_detached_run_then_prints_its_end)."""
    script = write_script("events.py", EVENT_SCRIPT)
    run = launch(LaunchSpec(target=[str(script), "5000"], nproc=2, backend="gloo", label="elsewhere"))
    try:
        app = make_app()
        async with app.run_test(size=(100, 40)) as pilot:
            screen = await open_in_monitor(pilot, run.record.run_id)
            assert screen.run is not None and screen.run.supervisor is None  # a handle from the record only
            await wait_for_app(pilot, lambda: screen.state is not None and screen.state.phase == "training", 120,
                               what="training")
            logs = screen.query_one(RankLogs)
            await wait_for_app(pilot, lambda: logs.buffers.get("rank1") and logs.buffers["rank1"].total > 3, 30,
                               what="rank 1's lines")
            await pilot.press("s")
            await pilot.pause()
            await pilot.press("y")
            await wait_for_app(pilot, lambda: screen.state.done, 60, what="the stop")
            assert screen.state.phase == "stopped"
            assert run_processes(run.record.run_id) == []
            assert not app.running_runs()  # a reattached run is not one this app started
    finally:
        if run.running():
            run.stop(grace=2)


async def test_the_runs_table_fits_80_columns():
    import time

    from textual.widgets import DataTable

    runs_root().mkdir(parents=True)
    shutil.copytree(FIXTURE, runs_root() / FIXTURE.name)
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("r")
        table = pilot.app.screen.query_one("#runs-table", DataTable)
        await wait_for_app(pilot, lambda: table.row_count > 0, 30, what="the runs table")
        await pilot.pause()
        assert table.virtual_size.width <= table.size.width, (table.virtual_size, table.size)  # nothing cut
        row = table.get_row(FIXTURE.name)
        assert row[0] == "train-tinycnn-f1x7"  # the date is in the started column
        assert row[4] == time.strftime("%m-%d %H:%M", time.localtime(1767225600.0))


async def test_the_runs_are_read_once_when_the_screen_opens_and_again_when_it_comes_back(monkeypatch):
    from mgtutor.tui.screens import runs as runs_screen

    reads: list[int] = []
    page = runs_screen.run_page
    monkeypatch.setattr(runs_screen, "run_page", lambda start: reads.append(start) or page(start))
    runs_root().mkdir(parents=True)
    shutil.copytree(FIXTURE, runs_root() / FIXTURE.name)
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("r")
        table = pilot.app.screen.query_one("#runs-table")
        await wait_for_app(pilot, lambda: table.row_count > 0, 30, what="the runs table")
        await pilot.pause()
        assert reads == [0]  # once: a second fill of the same rows only redraws the table
        await pilot.press("h", "r")
        await wait_for_app(pilot, lambda: len(reads) == 2, 30, what="the second read")


async def test_a_load_that_lands_after_the_cursor_moved_keeps_it_on_the_chosen_run():
    """Coming back to Runs shows the old rows until the new read lands; a cursor moved meanwhile stays on its run
    (Enter then opens the run that was chosen, not the first row)."""
    runs_root().mkdir(parents=True)
    for name in ("20260101-000000-a", "20260101-000001-b", "20260101-000002-c"):
        shutil.copytree(FIXTURE, runs_root() / name)
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("r")
        screen = pilot.app.screen
        table = screen.query_one("#runs-table")
        await wait_for_app(pilot, lambda: table.row_count == 3, 30, what="the runs table")
        chosen = "20260101-000000-a"
        table.move_cursor(row=table.get_row_index(chosen))
        assert table.get_row_index(chosen) > 0  # not the first row, where a fresh table's cursor stands
        rows, total = run_page(0)
        screen._show(rows, 0, total)  # the read the screen's return started, landing now
        assert table.row_count == 3 and table.cursor_row == table.get_row_index(chosen)
