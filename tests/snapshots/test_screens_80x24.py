"""Home, Lessons and the Monitor's launch form at 80×24 (a default SSH terminal): the footer shows
`?`, `q` and the screen's keys uncut, wrapped text stays in its column, the form has focus."""
from __future__ import annotations

import pytest

from mgtutor.tui.app import MgTutorApp


async def wait_settled(pilot) -> None:
    await pilot.pause(0.5)
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


@pytest.mark.parametrize("key", ["h", "l", "m"])
def test_screen_at_80x24(snap_compare, key, monkeypatch):
    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")
    assert snap_compare(MgTutorApp(), press=[key], run_before=wait_settled, terminal_size=(80, 24))
