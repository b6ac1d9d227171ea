"""Troubleshoot's "hangs" symptoms read the hang report a run left in its stacks/ (real app, Pilot).

The run directory is one a hung run leaves after Ctrl+C: meta, no result (stopped), and the
capture recorded from lesson 14's slow-loader hang (tests/data/hang/slow-loader-auto)."""
from __future__ import annotations

from pathlib import Path

import pytest

from mgtutor.tui.app import MgTutorApp
from tests.helpers import open_symptom, stopped_hung_run, wait_for_app

CAPTURE = Path(__file__).parent / "data" / "hang" / "slow-loader-auto"


async def test_last_run_shows_the_hang_report_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")
    stopped_hung_run(CAPTURE)
    app = MgTutorApp()
    async with app.run_test(size=(100, 40)) as pilot:
        screen = await open_symptom(pilot, "hang-later")
        await pilot.press("g")  # the last run
        await wait_for_app(pilot, lambda: bool(screen.findings), 60)
        first = screen.findings[0]
        assert first.kind == "rank_outside_collective" and first.rank == 1
        card = str(next(iter(screen.query(".fix-card"))).render())
        assert "rank_outside_collective" in card and "hang.py:56" in card
