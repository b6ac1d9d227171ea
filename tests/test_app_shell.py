"""The TUI shell at 80×24: the Home screen with the machine summary, every mode by key, help, quit."""
from __future__ import annotations

import pytest
from textual.widgets import Footer, Static

from mgtutor.training.runs import nvml
from mgtutor.training.runs.launch.launcher import LaunchSpec, launch
from mgtutor.training.runs.launch.procs import run_processes
from mgtutor.tui.app import MgTutorApp
from mgtutor.tui.screens.home import HomeScreen
from tests.helpers import give_cpu_torch_facts, wait_for_app

MODES = {"l": ("lessons", "Lessons"), "d": ("diagnostics", "Diagnostics"), "m": ("monitor", "Monitor"),
         "t": ("troubleshoot", "Troubleshoot"), "r": ("runs", "Runs"), "h": ("home", "Home")}


async def wait_for_machine(pilot, app) -> str:
    def summary() -> str:
        text = str(app.screen.query_one("#machine", Static).render())
        return "" if "looking for GPUs" in text else text

    return await wait_for_app(pilot, summary, 30, interval=0.05, what="the machine summary")


@pytest.mark.integration
async def test_home_then_every_mode_by_key(monkeypatch):
    # `d` opens Diagnostics, whose doctor asks torch in a child: that child is test_diagnostics_screen.py's;
    # here its facts are given
    give_cpu_torch_facts(monkeypatch)
    app = MgTutorApp()
    async with app.run_test(size=(80, 24)) as pilot:
        assert isinstance(app.screen, HomeScreen) and app.screen.title == "Home"
        text = await wait_for_machine(pilot, app)
        assert "No NVIDIA GPU" in text and "gloo" in text
        footer_keys = {b.key for b in app.BINDINGS}
        assert {"h", "l", "d", "m", "t", "r", "question_mark", "q"} <= footer_keys
        assert app.screen.query(Footer)
        for key, (mode, title) in MODES.items():
            await pilot.press(key)
            await pilot.pause()
            assert app.current_mode == mode
            assert app.screen.title == title
        await pilot.press("question_mark")
        await pilot.pause()
        assert "mgtutor keys" in str(app.screen.query_one(Static).render())
        await pilot.press("escape")
        await pilot.press("q")
        await pilot.pause()
    assert app.return_code == 0


async def test_home_lists_gpus_from_nvml(monkeypatch):
    fake = nvml.Inventory(gpus=[nvml.GpuInfo(0, "NVIDIA H200", 143771, "GPU-a"),
                                nvml.GpuInfo(1, "NVIDIA H200", 143771, "GPU-b")], driver="580.159.04")
    monkeypatch.setattr("mgtutor.tui.screens.home.inventory", lambda: fake)  # the NVML boundary
    app = MgTutorApp()
    async with app.run_test(size=(80, 24)) as pilot:
        text = await wait_for_machine(pilot, app)
    assert "2 NVIDIA GPU(s)" in text and "GPU 1  NVIDIA H200  140 GiB" in text and "NCCL" in text


SLEEPS = "import time\ntime.sleep(600)\n"


@pytest.mark.integration
@pytest.mark.parametrize("choice, still_running", [("s", False), ("k", True)])
async def test_quit_asks_before_stopping_runs(choice, still_running, write_script):
    run = launch(LaunchSpec(target=[str(write_script("sleep.py", SLEEPS))], nproc=2, backend="gloo"))
    try:
        app = MgTutorApp()
        async with app.run_test(size=(80, 24)) as pilot:
            app.track_run(run)
            await pilot.press("q")
            await pilot.pause()
            assert type(app.screen).__name__ == "QuitScreen"
            await pilot.press(choice)
            # stopping runs in a thread worker; the app quits when it is done
            await wait_for_app(pilot, lambda: app.return_code is not None, 30, what="the app to quit")
            assert app.return_code == 0
        assert run.running() is still_running
        if not still_running:
            assert run.record.result().stop.clean and not run_processes(run.record.run_id)
    finally:
        run.stop(grace=2)
