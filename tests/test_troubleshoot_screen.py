"""Troubleshoot mode in a real app: checks per symptom, a log diagnosed into fix cards, a real demo."""
from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Static

from mgtutor.tui.app import MgTutorApp
from tests.helpers import open_symptom, wait_for_app

LOGS = Path(__file__).parent / "data" / "logs"


def _static_text(screen, selector: str) -> str:
    return str(screen.query_one(selector, Static).render())


@pytest.mark.integration
async def test_symptom_checks_and_log_diagnosis(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")
    app = MgTutorApp()
    async with app.run_test(size=(100, 40)) as pilot:
        screen = await open_symptom(pilot, "port")
        await wait_for_app(pilot, lambda: "port" in _static_text(screen, "#ts-checks"), 120)
        assert "29500" in _static_text(screen, "#ts-checks")
        assert "port-in-use" in _static_text(screen, "#ts-status")
        await pilot.press("o")
        for char in str(LOGS / "cuda_oom_interleaved.log"):
            await pilot.press(char if char != " " else "space")
        await pilot.press("enter")
        await wait_for_app(pilot, lambda: bool(screen.findings), 120)
        assert screen.findings[0].kind == "cuda_oom"
        cards = list(screen.query(".fix-card"))
        assert cards and "cuda_oom" in str(cards[0].render()) and "14-when-it-goes-wrong" in str(cards[0].render())


@pytest.mark.integration
@pytest.mark.slow
async def test_demo_runs_for_real_and_shows_the_diagnosis(monkeypatch: pytest.MonkeyPatch) -> None:
    """At 80×24: the demo's log box above the card, and the whole fix reached with the keys. The demo's run is
    checked here as test_demos.py checks every other demo: it ran, streamed its lines, ended, and its cause came
    first with evidence and a lesson."""
    from tests.test_screen_80x24_troubleshoot import read_with_keys

    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")
    app = MgTutorApp()
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_symptom(pilot, "port")
        await pilot.press("x")
        await wait_for_app(pilot, lambda: bool(screen.findings) and not screen.busy
                           and bool(list(screen.query(".fix-card"))), timeout=150)
        first = screen.findings[0]
        assert first.kind == "port_in_use" and first.evidence and first.lesson
        assert "finished (diagnosed)" in _static_text(screen, "#ts-status")
        assert app.active_runs and not any(run.running() for run in app.active_runs.values())
        assert screen.query_one("#ts-log").line_count > 0
        await read_with_keys(pilot, screen, ["down"] * 40 + ["end"],
                             "Fix: " + first.fix)


@pytest.mark.integration
async def test_last_run_diagnosis_is_in_view_at_80x24(monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    from mgtutor.training.runs.records.record import runs_root

    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")
    fixture = Path(__file__).parent / "data" / "monitor_runs" / "20260101-000000-train-tinycnn-f1x7"
    runs_root().mkdir(parents=True)
    shutil.copytree(fixture, runs_root() / fixture.name)
    app = MgTutorApp()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("t")
        screen = app.screen
        assert not screen.query_one("#ts-log").display  # no empty box before a demo has run
        await pilot.press("g")
        await wait_for_app(pilot, lambda: "diagnosis of" in _static_text(screen, "#ts-status"), 120)
        await pilot.pause(0.3)
        status = screen.query_one("#ts-status")
        assert 0 < status.region.y and status.region.bottom <= 23, status.region  # on screen, above the footer
        cards = list(screen.query(".fix-card"))
        assert all(card.region.height for card in cards[:1])  # the first card is drawn in the viewport
