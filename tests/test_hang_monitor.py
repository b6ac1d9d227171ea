"""The Monitor's hang panel on a real hung run: lesson 14's hang.py (rank 1's data loader never
returns) launched from the form, 2 gloo ranks; the panel names rank 1 and folds each rank's stack;
`x` takes the stacks again on demand; stopping leaves no process. The ranks (torch, a real gloo all_reduce)
start through the stand-in torchrun: the panel, its captures and its stop are mgtutor's; this same hang on
ranks torchrun started: test_hang_cli.py::test_rank_stuck_in_its_data_loader_is_named."""
from __future__ import annotations

import pytest
from textual.widgets import Collapsible

from conftest import REPO
from mgtutor.training.runs.launch.procs import run_processes
from mgtutor.training.runs.forensics.stacks import list_captures
from mgtutor.tui.widgets.hang_panel import HangPanel
from tests.helpers import wait_for_app
from tests.test_monitor_live import SIZE, launch_from_form, open_form
from tests.monitor_helpers import make_app

pytestmark = [pytest.mark.integration, pytest.mark.slow]
HANG = str(REPO / "lessons" / "14-when-it-goes-wrong" / "hang.py")


@pytest.fixture(autouse=True)
def no_nvml(monkeypatch):
    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")


async def test_hang_panel_names_the_stuck_rank_and_x_takes_stacks_again(standin_torchrun):
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        screen, form = await open_form(pilot, kind="script", script=HANG, script_args="--mode slow-loader",
                                       nproc="2", backend="gloo")
        await launch_from_form(pilot, form)
        panel = screen.query_one(HangPanel)
        await wait_for_app(pilot, lambda: panel.report is not None, 120, what="the hang report")
        assert panel.has_class("-visible") and panel.title == "hang: rank_outside_collective — rank 1"
        assert panel.report["where"]["1"]["worker"]["function"] == "__getitem__"
        panel.collapsed = False
        await pilot.pause()
        assert [c.title for c in panel.query(Collapsible) if c is not panel] == ["rank 0 stack", "rank 1 stack"]
        before = len(list_captures(screen.record))
        await pilot.press("x")
        await wait_for_app(pilot, lambda: len(list_captures(screen.record)) > before, 60, what="a capture on demand")
        await wait_for_app(pilot, lambda: "on-demand" in (panel.report or {}).get("capture", ""), 60,
                           what="the panel to show the new capture")
        await pilot.press("s")
        await pilot.pause()
        await pilot.press("y")
        await wait_for_app(pilot, lambda: screen.state is not None and screen.state.done, 90, what="the run to stop")
        assert run_processes(screen.record.run_id) == []
