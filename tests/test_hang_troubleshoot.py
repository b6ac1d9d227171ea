"""Troubleshoot's "hangs" symptoms read the hang report a run left in its stacks/ (real app, Pilot).

The run directory is one a hung run leaves after Ctrl+C: meta, no result (stopped), and the
capture recorded from lesson 14's slow-loader hang (tests/data/hang/slow-loader-auto)."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from mgtutor.tui.app import MgTutorApp
from tests.helpers import open_symptom, wait_for_app

CAPTURE = Path(__file__).parent / "data" / "hang" / "slow-loader-auto"


def stopped_hung_run() -> Path:
    run = Path(os.environ["XDG_STATE_HOME"]) / "mgtutor" / "runs" / "20261201-100000-hang-py-0001"
    for sub in ("logs", "ranks"):
        (run / sub).mkdir(parents=True)
    (run / "meta.json").write_text(json.dumps({"run_id": run.name, "label": "hang.py", "world_size": 2,
                                               "backend": "gloo", "status": "stopped", "started": 1.0}))
    (run / "result.json").write_text(json.dumps({"run_id": run.name, "status": "stopped", "world_size": 2,
                                                 "ranks": [], "first_failure": None}))
    shutil.copytree(CAPTURE, run / "stacks" / "20261201-100010-1-stall")
    return run


async def test_last_run_shows_the_hang_report_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")
    stopped_hung_run()
    app = MgTutorApp()
    async with app.run_test(size=(100, 40)) as pilot:
        screen = await open_symptom(pilot, "hang-later")
        await pilot.press("g")  # the last run
        await wait_for_app(pilot, lambda: bool(screen.findings), 60)
        first = screen.findings[0]
        assert first.kind == "rank_outside_collective" and first.rank == 1
        card = str(next(iter(screen.query(".fix-card"))).render())
        assert "rank_outside_collective" in card and "hang.py:56" in card
