"""The report from the TUI: `b` in Runs (the selected run) and in Monitor (the run shown) writes the
run's report.html and says where it is. The report takes the doctor report (a child process that asks torch):
in Runs for real; in Monitor, the same key's same code (tui/screens/report_key.py) with torch's facts given."""
from __future__ import annotations

import shutil

import pytest

from mgtutor.training.runs.records.record import runs_root
from tests.helpers import give_cpu_torch_facts, wait_for_app
from tests.monitor_helpers import make_app
from tests.test_runs_screen import FIXTURE, open_in_monitor

pytestmark = pytest.mark.integration


@pytest.fixture(autouse=True)
def a_past_run(monkeypatch):
    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")
    runs_root().mkdir(parents=True)
    shutil.copytree(FIXTURE, runs_root() / FIXTURE.name)


def said(app) -> str:
    return "\n".join(str(n.message) for n in app._notifications)


async def test_b_in_runs_writes_the_selected_runs_report():
    report = runs_root() / FIXTURE.name / "report.html"
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("r")
        table = pilot.app.screen.query_one("#runs-table")
        await wait_for_app(pilot, lambda: table.row_count > 0, 30, what="the runs table")
        table.focus()
        await pilot.press("b")
        await wait_for_app(pilot, lambda: f"report: {report}" in said(pilot.app), 120, what="the report's notice")
    html = report.read_text()
    assert "<!DOCTYPE html>" in html and FIXTURE.name in html and 'id="chart-throughput"' in html


async def test_b_in_monitor_writes_the_shown_runs_report(monkeypatch):
    # the doctor's torch child is test_b_in_runs_writes_the_selected_runs_report's; here its facts are given
    give_cpu_torch_facts(monkeypatch)
    report = runs_root() / FIXTURE.name / "report.html"
    app = make_app()
    async with app.run_test(size=(100, 40)) as pilot:
        screen = await open_in_monitor(pilot, FIXTURE.name)
        await wait_for_app(pilot, lambda: screen.state is not None and screen.state.done, 30, what="the replay")
        await pilot.press("b")
        await wait_for_app(pilot, lambda: f"report: {report}" in said(pilot.app), 120, what="the report's notice")
    assert report.stat().st_size > 10_000
