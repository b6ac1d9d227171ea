"""The TUI survives every broken record (issue 27): Runs mode lists a mode-000 run, a run whose logs
are FIFOs and one with wrong-typed JSON beside a good one, each opens in Monitor without a crash or
a thread stuck on a FIFO, and `q` still quits."""
from __future__ import annotations

import os

import pytest
from textual.widgets import DataTable

from mgtutor.training.runs.records.record import RunMeta, RunRecord, write_json_atomic
from mgtutor.tui.screens.monitor import MonitorScreen
from tests.helpers import wait_for_app
from tests.monitor_helpers import make_app
from tests.unprivileged import modes_apply, without_dac_override

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(autouse=True)
def no_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")


def _run(label: str, meta: dict | None = None, result: dict | None = None) -> RunRecord:
    record = RunRecord.create(label)
    record.write_meta(RunMeta.from_json({"run_id": record.run_id, "label": label, "target": ["t.py"],
                                         "world_size": 1, "backend": "gloo", "started": 1.7e9, "status": "finished"}))
    if meta is not None:
        write_json_atomic(record.path / "meta.json", meta)
    write_json_atomic(record.path / "result.json", result or {"status": "finished", "world_size": 1, "ranks": []})
    return record


@pytest.fixture
def broken_runs() -> dict[str, RunRecord]:
    runs = {"good": _run("good")}
    runs["typed"] = _run("typed", meta={"started": "yesterday", "target": None, "world_size": "two"},
                         result={"status": "failed", "first_failure": 5})
    runs["fifo"] = _run("fifo")
    for path in (runs["fifo"].rank_log(0, "stdout"), runs["fifo"].events_path, runs["fifo"].torchrun_log):
        os.mkfifo(path)
    runs["locked"] = _run("locked")
    os.chmod(runs["locked"].path, 0)
    yield runs
    os.chmod(runs["locked"].path, 0o700)


def _row(table: DataTable, run_id: str) -> list[str]:
    return [str(cell) for cell in table.get_row(run_id)]


@pytest.mark.integration
async def test_every_broken_record_is_a_row_and_opens_without_a_crash(broken_runs: dict[str, RunRecord]) -> None:
    with without_dac_override():
        assert modes_apply(str(broken_runs["locked"].path))
        app = make_app()
        async with app.run_test(size=(100, 40)) as pilot:
            await pilot.press("r")
            table = pilot.app.screen.query_one("#runs-table", DataTable)
            await wait_for_app(pilot, lambda: table.row_count == 4, 30, what="all four runs listed")
            assert "Permission denied" in " ".join(_row(table, broken_runs["locked"].run_id))
            assert _row(table, broken_runs["locked"].run_id)[1] == "unreadable"
            assert "wrong type" in " ".join(_row(table, broken_runs["typed"].run_id))
            assert _row(table, broken_runs["good"].run_id)[1] == "finished"
            for name in ("fifo", "typed", "locked"):
                table.move_cursor(row=table.get_row_index(broken_runs[name].run_id))
                table.focus()
                await pilot.press("enter")
                await wait_for_app(pilot, lambda: isinstance(pilot.app.screen, MonitorScreen), 10, what="monitor")
                screen = pilot.app.screen
                await wait_for_app(pilot, lambda: screen.record is not None
                                   and screen.record.run_id == broken_runs[name].run_id, 10, what=f"{name} opened")
                await pilot.pause(0.5)  # the follow thread reads the run's files meanwhile
                await pilot.press("r")
                table = pilot.app.screen.query_one("#runs-table", DataTable)
                await wait_for_app(pilot, lambda: table.row_count == 4, 30, what="back in Runs")
            await pilot.press("q")
            await wait_for_app(pilot, lambda: not app.is_running, 30, what="q to quit")
