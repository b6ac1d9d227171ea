"""The Diagnostics screen's `y` writes doctor.md without following a symlink planted there (issue 46,
item 14): the link is replaced by mgtutor's own 0600 file, the file it pointed at is untouched."""
from __future__ import annotations

import stat
from pathlib import Path

import pytest

from mgtutor.diagnostics.doctor import saved
from mgtutor.tui.app import MgTutorApp
from mgtutor.tui.screens.diagnostics import DiagnosticsScreen
from tests.helpers import wait_for_app


def _plant_link(tmp_path: Path) -> tuple[Path, Path]:
    victim = tmp_path / "victim.txt"
    victim.write_text("someone else's file\n")
    markdown = saved.saved_path("doctor").with_suffix(".md")
    markdown.parent.mkdir(parents=True, exist_ok=True)
    markdown.symlink_to(victim)
    return markdown, victim


def test_the_markdown_report_replaces_a_planted_symlink(tmp_path: Path) -> None:
    markdown, victim = _plant_link(tmp_path)
    assert saved.save_markdown("doctor", "### mgtutor doctor\n") == markdown
    assert victim.read_text() == "someone else's file\n"
    assert not markdown.is_symlink() and markdown.read_text() == "### mgtutor doctor\n"
    assert stat.S_IMODE(markdown.stat().st_mode) == 0o600


@pytest.mark.integration  # the doctor asks torch in a subprocess
async def test_y_on_the_diagnostics_screen_never_writes_through_a_symlink(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")
    markdown, victim = _plant_link(tmp_path)
    app = MgTutorApp()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("d")
        screen = app.screen
        assert isinstance(screen, DiagnosticsScreen)
        await wait_for_app(pilot, lambda: screen.doctor_report is not None and "doctor" not in screen.busy, 240)
        await pilot.press("y")
        await pilot.pause()
    assert victim.read_text() == "someone else's file\n"
    assert not markdown.is_symlink() and markdown.read_text().startswith("### mgtutor doctor")
