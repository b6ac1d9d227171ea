"""A Monitor reattached to a run that has been going a while follows its new lines (issue 27 item 9):
the run fills the log before the meters and charts take their rows, so the pane shrinks under a view
that was at the end; the log must still end at the newest line, and say when it does not.

The run is two torch-free ranks that print and log as the trainer does (tests/trainer_like_rank.py) under
the stand-in torchrun: the point is the Monitor following lines, not the trainer, whose Monitor path
stays real in test_monitor_live.py."""
from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Log

from mgtutor.training.runs.launch.launcher import LaunchSpec, launch
from mgtutor.tui.widgets.rank_logs import RankLogs
from tests.helpers import wait_for, wait_for_app
from tests.monitor_helpers import make_app
from tests.test_runs_screen import open_in_monitor

TRAINER = [str(Path(__file__).parent / "trainer_like_rank.py"), "1000000"]


def at_end(log: Log) -> bool:
    return log.scroll_offset.y == log.max_scroll_y


@pytest.fixture(autouse=True)
def no_nvml(monkeypatch):
    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")


@pytest.mark.integration
async def test_a_reattached_monitor_follows_new_lines_and_says_when_paused(standin_torchrun):
    run = launch(LaunchSpec(target=TRAINER, nproc=2, backend="gloo", label="train-tinycnn"))
    try:
        out = run.record.rank_log(0, "stdout")
        wait_for(lambda: out.exists() and out.read_text().count("\n") > 200, 120, what="the run's first 200 lines")
        app = make_app()
        async with app.run_test(size=(80, 24)) as pilot:
            screen = await open_in_monitor(pilot, run.record.run_id)
            logs = screen.query_one(RankLogs)
            log = logs.log_view
            await wait_for_app(pilot, lambda: screen.state is not None and log.line_count > 100, 60,
                               what="the old lines and the run's state")
            for _ in range(3):  # batch after batch, the view is on the newest line
                last = log.lines[-1]
                await wait_for_app(pilot, lambda: log.lines[-1] != last, 30, what="a new line")
                await pilot.pause(0.3)
                assert log.auto_scroll and not logs.has_class("-paused")
                assert at_end(log), (log.scroll_offset, log.max_scroll_y, log.size)
            assert log.virtual_size.width <= log.scrollable_content_region.width  # wrapped, nothing cut

            await pilot.press("pageup")  # the user scrolls back: the log stays there and says it is paused
            await pilot.pause(0.3)
            assert not log.auto_scroll and logs.has_class("-paused")
            top = log.scroll_offset.y
            last = log.lines[-1]
            await wait_for_app(pilot, lambda: log.lines[-1] != last, 30, what="a new line while paused")
            assert log.scroll_offset.y <= top
            await pilot.press("end")  # End follows again
            last = log.lines[-1]
            await wait_for_app(pilot, lambda: log.lines[-1] != last, 30, what="a new line after End")
            await pilot.pause(0.3)
            assert log.auto_scroll and not logs.has_class("-paused") and at_end(log)
    finally:
        run.stop(grace=2)
