"""Every mode at 80×24 (a default SSH terminal): the footer shows `?`, `q` and the screen's own keys,
uncut; `?` lists the current screen's keys (also those the footer leaves out) and the global ones."""
from __future__ import annotations

import pytest
from textual.binding import Binding
from textual.widgets import Static
from textual.widgets._footer import FooterKey

from mgtutor.tui.app import MgTutorApp
from mgtutor.tui.screens.help import HelpScreen

MODES = ["h", "l", "d", "m", "t", "r"]


def shown_keys(screen) -> dict[str, str]:
    """The keys the footer draws, with the column where each ends."""
    return {key.key_display: key.region.right for key in screen.query(FooterKey) if key.region.width}


def footer_bindings(screen) -> list[Binding]:
    """The screen's own bindings the footer should show now (shown, and allowed by check_action)."""
    wanted = []
    for binding in type(screen).BINDINGS:
        if isinstance(binding, Binding) and binding.show:
            action = binding.action.split("(")[0]
            if screen.check_action(action, ()) is not False:
                wanted.append(binding)
    return wanted


def diagnostics_app() -> MgTutorApp:
    """Diagnostics shows a saved doctor's report (its checks made as the doctor makes them) instead of asking the
    doctor, a torch child process: the footer is the screen's, whatever the report says. The doctor's own run in
    the app is test_diagnostics_screen.py::test_doctor_bench_and_probe_from_the_screen_in_chinese_then_english's."""
    from tests.snapshots.test_screens_zh_80x24 import FixtureDiagnosticsApp

    return FixtureDiagnosticsApp()


@pytest.mark.sweep
@pytest.mark.parametrize("mode_key", MODES)
async def test_footer_fits_80_columns_with_help_quit_and_the_screens_keys(mode_key, monkeypatch):
    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")
    app = MgTutorApp() if mode_key != "d" else diagnostics_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press(mode_key)
        await pilot.pause()
        screen = app.screen
        screen.set_focus(None)  # a field's own keys (an Input's) are not the screen's
        await pilot.pause()
        keys = shown_keys(screen)
        assert "?" in keys and "q" in keys, keys
        for binding in footer_bindings(screen):
            assert app.get_key_display(binding) in keys, (screen.title, binding, keys)
        assert max(keys.values()) <= 80, (screen.title, keys)


@pytest.mark.integration
async def test_help_lists_the_current_screens_keys_and_the_global_ones(monkeypatch):
    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")
    app = MgTutorApp()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("l")
        await pilot.pause()
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        text = str(app.screen.query_one("#help-text", Static).render())
        assert "Lessons" in text and "run the lesson's steps" in text and "the next hint" in text
        assert "Reset exercise" in text  # a key the footer leaves out is still found here
        assert "Troubleshoot" in text and "quit" in text  # the global keys
        await pilot.press("escape")
        await pilot.press("m")
        await pilot.pause()
        await pilot.press("question_mark")  # from the launch form's first field (a Select): still help
        await pilot.pause()
        text = str(app.screen.query_one("#help-text", Static).render())
        assert "Monitor" in text and "Copy run folder" in text and "Next match" in text
        assert "the full log files in $PAGER" in text  # help says what a terse footer word means
