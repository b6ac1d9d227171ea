"""Home, Lessons and the Monitor's launch form at 80×24 (a default SSH terminal): the footer shows
`?`, `q` and the screen's keys uncut, wrapped text stays in its column, the form has focus."""
from __future__ import annotations

import pytest

from mgtutor.tui.app import MgTutorApp


async def wait_settled(pilot) -> None:
    await pilot.pause(0.5)
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


@pytest.mark.sweep
@pytest.mark.parametrize("key", ["h", "l", "m"])
def test_screen_at_80x24(snap_compare, key, monkeypatch):
    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")
    assert snap_compare(MgTutorApp(), press=[key], run_before=wait_settled, terminal_size=(80, 24))


RUN_TAB_LINES = [
    "── Run the script on 2 ranks: 2 rank(s), gloo — 2 CPU ranks on gloo — no NVIDIA GPU (NVML not available)",
    "r0│ [rank 0] step 10/100 loss 2.1021 throughput 1,274 samples/s/rank data wait 1% mem 689 MiB",
    "r1│ [rank 1] world size 2, backend gloo, MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 — this rank sees no GPU",
]


async def lessons_run_tab(pilot) -> None:
    """The Run tab with lines as long as a lesson's runs print: each wraps inside the pane."""
    await pilot.press("l")
    await wait_settled(pilot)
    screen = pilot.app.screen
    screen.query_one("#lesson-tabs").active = "tab-run"
    await pilot.pause()
    screen._pending.extend(RUN_TAB_LINES)
    await pilot.pause(0.3)


@pytest.mark.integration
def test_lessons_run_tab_at_80x24(snap_compare, monkeypatch):
    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")
    assert snap_compare(MgTutorApp(), run_before=lessons_run_tab, terminal_size=(80, 24))
