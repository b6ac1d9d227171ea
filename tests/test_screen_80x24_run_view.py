"""A past run in the Monitor at 80×24 (issue 45, items 2 and 3): the diagnosis box never cuts the fix
(it grows, and scrolls with the keys beyond half the view), and a hung run that was stopped shows, when
reopened from Runs, the hang that `mgtutor diagnose` finds."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from textual.app import App, ComposeResult

from mgtutor.diagnostics.failures.classify import Finding
from mgtutor.diagnostics.failures.hang.watch import diagnose_with_hangs
from mgtutor.training.runs.follow.runstate import RunState
from mgtutor.training.runs.records.record import RunRecord, runs_root
from mgtutor.tui.app import MgTutorApp
from mgtutor.tui.screens.monitor import MonitorScreen
from mgtutor.tui.widgets.hang_panel import HangPanel
from mgtutor.tui.widgets.run_state import FailureBanner
from tests.helpers import wait_for_app
from tests.screen_text import rows
from tests.test_runs_screen import open_in_monitor
from tests.test_screen_80x24_troubleshoot import squeezed, stopped_world_size_run

FIXTURE = Path(__file__).parent / "data" / "monitor_runs" / "20260101-000000-train-tinycnn-f1x7"


def in_view(screen, widget) -> str:
    """The widget's rows as the terminal shows them (what is scrolled away or cut off is not there)."""
    region = widget.region.intersection(screen.region)
    return "\n".join(line[region.x:region.right] for line in rows(screen)[region.y:region.bottom])


async def open_from_runs(pilot, run_id: str) -> MonitorScreen:
    """Runs (r), the run's row, Enter: the Monitor replays it from its files to the end."""
    screen = await open_in_monitor(pilot, run_id)
    await wait_for_app(pilot, lambda: screen.state is not None and screen.state.done, 30, what="the replay")
    await pilot.pause(0.3)
    return screen


@pytest.mark.integration
@pytest.mark.parametrize("height", [24, 40])
async def test_the_diagnosis_box_of_a_past_run_shows_the_whole_fix(height, monkeypatch):
    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")
    runs_root().mkdir(parents=True)
    shutil.copytree(FIXTURE, runs_root() / FIXTURE.name)
    app = MgTutorApp()
    async with app.run_test(size=(80, height)) as pilot:
        screen = await open_from_runs(pilot, FIXTURE.name)
        finding = screen.finding
        assert finding is not None and finding.fix
        shown = in_view(screen, screen.query_one(FailureBanner))
        assert squeezed("fix: " + finding.fix) in squeezed(shown), shown
        assert squeezed(f"(o: open lesson {finding.lesson})") in squeezed(shown), shown


class BannerApp(App[None]):
    def compose(self) -> ComposeResult:
        yield FailureBanner(id="failure-banner")


async def test_a_diagnosis_longer_than_half_the_screen_scrolls_to_its_last_word_with_the_keys():
    fix = " ".join(f"step{n} of the fix;" for n in range(1, 200)) + " the very last words."
    finding = Finding("nccl_error", 1, "a summary of the failure " * 10, fix, [], "14-when-it-goes-wrong")
    state = RunState(run_id="r", phase="failed", world_size=2)
    app = BannerApp()
    async with app.run_test(size=(80, 24)) as pilot:
        banner = app.query_one(FailureBanner)
        banner.show(state, finding)
        await pilot.pause()
        assert 1 < banner.region.height <= 12  # grown, up to half the screen: the logs keep the rest
        assert "the very last words" not in in_view(app.screen, banner)
        banner.focus()
        await pilot.press("end")
        await pilot.pause()
        assert "the very last words" in " ".join(in_view(app.screen, banner).split())


@pytest.mark.integration
async def test_a_hung_run_that_was_stopped_shows_its_hang_when_reopened_from_runs(monkeypatch):
    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")
    record = RunRecord(stopped_world_size_run())
    expected = diagnose_with_hangs(record)[0]  # what `mgtutor diagnose` says of it
    assert expected.kind == "world_size_mismatch"
    app = MgTutorApp()
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_from_runs(pilot, record.run_id)
        panel = screen.query_one(HangPanel)
        await wait_for_app(pilot, lambda: panel.has_class("-visible"), 30, what="the hang panel")
        await pilot.pause(0.3)
        assert not panel.collapsed
        shown = in_view(screen, panel)
        assert "hang: world_size_mismatch" in shown
        assert squeezed("fix: " + expected.fix) in squeezed(shown), shown
