"""Pieces the GPU tests share: the environment for the CLI there, a hung NCCL demo run through
`mgtutor run`, Home's machine summary, and a training run started from the Monitor's form."""
from __future__ import annotations

import os
import time
from pathlib import Path

from textual.widgets import Static

from test_hang_cli import Cli
from mgtutor.tui.screens.monitor import MonitorScreen
from mgtutor.tui.widgets.launch_form import LaunchForm
from tests.helpers import wait_for_app

DEVICE_PYSPY = "/tmp/site/bin/py-spy"  # device_setup.sh installs wheels with --target


def gpu_env() -> dict[str, str]:
    env = dict(os.environ)
    if not env.get("MGTUTOR_PYSPY") and Path(DEVICE_PYSPY).is_file():
        env["MGTUTOR_PYSPY"] = DEVICE_PYSPY
    return env


def hung_nccl_demo(nproc: int, mode: str, after: str | None = None, settle_s: float = 1.0) -> tuple[Cli, str, float]:
    """`mgtutor run` of a demo that hangs on NCCL (600 s collective timeout, so only mgtutor answers in
    time): seconds from `after` on stdout (or from start) to the hang report, then Ctrl+C.
    Returns the CLI (for its run record), its stderr and those seconds."""
    cli = Cli("run", "--nproc", str(nproc), "--backend", "nccl", "--", "-m", "mgtutor.training.worker.probes.demos",
              mode, "--timeout", "600", env=gpu_env())
    try:
        waited = cli.wait_for("hang report (", after=after)
        time.sleep(settle_s)  # the rest of the report
        err = cli.interrupt()
    finally:
        cli.kill()
    return cli, err, waited


async def machine_summary(pilot) -> str:
    """Home's machine summary once NVML has answered."""
    def summary() -> str:
        shown = str(pilot.app.screen.query_one("#machine", Static).render())
        return "" if "looking" in shown else shown

    return await wait_for_app(pilot, summary, 30, interval=0.05, what="the machine summary")


async def train_from_monitor(pilot, nproc: int) -> MonitorScreen:
    """Monitor mode, a ResNet-18 run of `nproc` ranks started from its form, waited for until it trains."""
    await pilot.press("m")
    screen = pilot.app.screen
    assert isinstance(screen, MonitorScreen)
    form = screen.query_one(LaunchForm)
    for key, value in {"model": "resnet18", "steps": "3000", "batch_size": "256", "log_every": "20",
                       "nproc": str(nproc), "backend": "auto"}.items():
        form.query_one(f"#f-{key.replace('_', '-')}").value = value
    await pilot.pause()
    form.query_one("#f-nproc").focus()
    await pilot.press("enter")
    await wait_for_app(pilot, lambda: screen.state is not None and screen.state.phase == "training"
                       and any(r.last_step for r in screen.state.ranks.values()), 300, what="training")
    return screen
