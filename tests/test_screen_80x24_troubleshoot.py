"""Troubleshoot at 80×24 (issue 45, item 1): after `g` (the last run) or `x` (a demo) the fix card is
brought into view and the keys a user tries (Down, PageDown, End) reach the whole of it. The demo's
case is test_troubleshoot_screen.py's real demo, read at 80×24 with `read_with_keys`."""
from __future__ import annotations

from pathlib import Path

import pytest
from textual.containers import VerticalScroll

from mgtutor.tui.app import MgTutorApp
from tests.helpers import open_symptom, stopped_hung_run, wait_for_app
from tests.screen_text import rows

HANG = Path(__file__).parent / "data" / "hang" / "world-size-auto"


def stopped_world_size_run() -> Path:
    """A run that hung in init_process_group (the script asked for one rank more), then was stopped."""
    return stopped_hung_run(HANG, "20261201-100000-ws-py-0001")


def squeezed(text: str) -> str:
    """The words without the cards' borders and line breaks: wrapping cannot hide a cut."""
    return "".join(text.replace("│", "").split())


def card_text_in_view(screen) -> str:
    """The rows of the fix cards that the scrolled body shows now, as drawn."""
    body = screen.query_one("#ts-body", VerticalScroll)
    view, drawn = body.content_region, rows(screen)
    shown = []
    for card in screen.query(".fix-card"):
        region = card.region.intersection(view)
        shown += [line[region.x:region.right] for line in drawn[region.y:region.bottom]]
    return "\n".join(shown)


async def read_with_keys(pilot, screen, keys: list[str], wanted: str) -> str:
    """Press the keys one by one until the cards' rows in view hold `wanted` whole, at once."""
    for key in [None, *keys]:
        if key:
            await pilot.press(key)
        await pilot.pause(0.1)
        text = card_text_in_view(screen)
        if squeezed(wanted) in squeezed(text):
            return text
    raise AssertionError(f"{wanted!r} was never wholly in view with {keys}:\n" + "\n".join(rows(screen)))


async def test_after_g_the_whole_fix_is_in_view_or_reached_with_the_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")
    stopped_world_size_run()
    app = MgTutorApp()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("t")
        screen = app.screen
        await pilot.press("g")
        await wait_for_app(pilot, lambda: bool(screen.findings) and bool(list(screen.query(".fix-card"))), 60)
        finding = screen.findings[0]
        assert finding.kind == "world_size_mismatch"
        assert "finding(s) below" in "\n".join(rows(screen))  # the line that points at it is in view
        await read_with_keys(pilot, screen, ["down"] * 3 + ["pagedown", "end"], "Fix: " + finding.fix)
        await read_with_keys(pilot, screen, ["pagedown", "end"], "Lesson: " + finding.lesson)


async def test_a_symptom_open_then_g_brings_the_card_into_view_with_the_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """With a symptom open its checks and hints fill the pane above the diagnosis."""
    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")
    stopped_world_size_run()
    app = MgTutorApp()
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_symptom(pilot, "hang")
        await pilot.press("g")
        await wait_for_app(pilot, lambda: bool(screen.findings) and bool(list(screen.query(".fix-card"))), 60)
        await read_with_keys(pilot, screen, ["pagedown"] * 4 + ["end"], "Fix: " + screen.findings[0].fix)
