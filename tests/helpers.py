"""Waiting in tests: poll a condition until it holds, never sleep a fixed time and hope.

`wait_for` polls from plain code; `wait_for_app` polls inside a Textual test, where the app runs between
looks. Both return the condition's first truthy value and fail with `what` when `timeout` seconds pass
without one."""
from __future__ import annotations

import asyncio
import json
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from textual.pilot import Pilot

T = TypeVar("T")

# What the doctor's torch child answers on a CPU build, for app tests whose subject is not that child.
CPU_TORCH_FACTS = {"torch": "2.11.0+cpu", "cuda": None, "nccl": None, "gloo_available": True}


def give_cpu_torch_facts(monkeypatch) -> None:
    """The doctor's torch child stood in (the Diagnostics screen asks it): it answers as a CPU build does."""
    from mgtutor.diagnostics.doctor import versions

    monkeypatch.setattr(versions, "gather", lambda *args, **kwargs: dict(CPU_TORCH_FACTS))


def _give_up_after(timeout: float, condition: Callable[[], object], what: str) -> Callable[[], None]:
    deadline = time.monotonic() + timeout

    def check() -> None:
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what or condition}")

    return check


def wait_for(condition: Callable[[], T], timeout: float = 60.0, interval: float = 0.1, what: str = "") -> T:
    give_up = _give_up_after(timeout, condition, what)
    while not (value := condition()):
        give_up()
        time.sleep(interval)
    return value


async def wait_for_app(pilot: Pilot, condition: Callable[[], T], timeout: float = 60.0, interval: float = 0.1,
                       what: str = "") -> T:
    """Between looks the app runs on its own (asyncio.sleep): `pilot.pause` would have every widget of the screen
    answer a message and the screen lay itself out each time, which over a run of a minute cost more CPU than the
    app's own work. Once the condition holds, one pause lets what it set off settle."""
    give_up = _give_up_after(timeout, condition, what)
    while not (value := condition()):
        give_up()
        await asyncio.sleep(interval)
    await pilot.pause()
    return value


async def open_symptom(pilot: Pilot, symptom: str):  # -> TroubleshootScreen
    """From Home: Troubleshoot (key t), then the symptom with this id opened."""
    from textual.widgets import OptionList

    from mgtutor.tui.screens.troubleshoot import TroubleshootScreen

    await pilot.press("t")
    screen = pilot.app.screen
    assert isinstance(screen, TroubleshootScreen)
    options = screen.query_one("#ts-symptoms", OptionList)
    options.highlighted = [o.id for o in options._options].index(symptom)
    await pilot.press("enter")
    return screen


def stopped_hung_run(capture: Path, run_id: str = "20261201-100000-hang-py-0001") -> Path:
    """The run directory a hung run leaves once stopped (Ctrl+C, `runs stop`): meta, a result without a
    failure, no rank records, and `capture` (a folder of tests/data/hang) as the hang watch saved it."""
    run = Path(os.environ["XDG_STATE_HOME"]) / "mgtutor" / "runs" / run_id
    for sub in ("logs", "ranks"):
        (run / sub).mkdir(parents=True)
    label = run_id.split("-", 2)[2].rsplit("-", 1)[0].replace("-py", ".py")
    (run / "meta.json").write_text(json.dumps({"run_id": run.name, "label": label, "world_size": 2,
                                               "backend": "gloo", "status": "stopped", "started": 1.0}))
    (run / "result.json").write_text(json.dumps({"run_id": run.name, "status": "stopped", "world_size": 2,
                                                 "ranks": [], "first_failure": None}))
    shutil.copytree(capture, run / "stacks" / "20261201-100010-1-stall")
    return run
