"""The Monitor's launch form by keyboard at 80×24: the first field has focus, Enter launches from any
field (a Select's list opens with space), Escape leaves a field, and then the mode keys work."""
from __future__ import annotations

import pytest
from textual.app import App, ComposeResult
from textual.widgets import Input, Select

from mgtutor.tui.app import MgTutorApp
from mgtutor.tui.widgets.launch_form import LaunchForm


class FormApp(App[None]):
    def __init__(self) -> None:
        super().__init__()
        self.submitted: list[LaunchForm.Submitted] = []

    def compose(self) -> ComposeResult:
        yield LaunchForm(id="launch-form")

    def on_mount(self) -> None:
        self.query_one(LaunchForm).focus_first()

    def on_launch_form_submitted(self, message: LaunchForm.Submitted) -> None:
        self.submitted.append(message)


async def test_enter_launches_from_a_select_and_from_a_text_field():
    app = FormApp()
    async with app.run_test(size=(80, 24)) as pilot:
        assert app.focused is not None and app.focused.id == "f-kind"
        await pilot.press("enter")  # on a Select: launches, does not open the list
        await pilot.pause()
        assert len(app.submitted) == 1 and "--nproc 2" in app.submitted[0].command
        app.query_one("#f-steps", Input).focus()
        await pilot.press("end", "backspace", "backspace", "9", "enter")
        await pilot.pause()
        assert len(app.submitted) == 2 and "--steps 9" in app.submitted[1].command


async def test_space_opens_a_list_where_enter_picks_without_launching():
    app = FormApp()
    async with app.run_test(size=(80, 24)) as pilot:
        app.query_one("#f-backend", Select).focus()
        await pilot.press("space")
        await pilot.pause()
        assert app.query_one("#f-backend", Select).expanded
        await pilot.press("down", "enter")
        await pilot.pause()
        assert not app.submitted and app.query_one("#f-backend", Select).value == "nccl"


@pytest.mark.integration
async def test_escape_leaves_a_field_and_the_mode_keys_work_again(monkeypatch):
    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")
    app = MgTutorApp()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("m")
        await pilot.pause()
        assert app.focused is not None and app.focused.id == "f-kind"  # Enter would launch at once
        app.screen.query_one("#f-steps", Input).focus()
        await pilot.press("l")  # in a text field a letter is text
        await pilot.pause()
        assert app.current_mode == "monitor" and app.screen.query_one("#f-steps", Input).value.endswith("l")
        await pilot.press("escape", "l")  # out of the field: l is Lessons again
        await pilot.pause()
        assert app.current_mode == "lessons"
