"""Quit while runs are going: stop them, leave them running, or stay."""
from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from mgtutor.training.foundation.i18n import N_, _


class QuitScreen(ModalScreen[str | None]):
    BINDINGS = [Binding("escape", "cancel", N_("Stay")), Binding("s", "choose('stop')", N_("Stop runs")),
                Binding("k", "choose('leave')", N_("Keep running"))]

    def __init__(self, running: int) -> None:
        super().__init__()
        self.running = running

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(_("[b]{count} run(s) started here are still going.[/b]").format(count=self.running) + "\n"
                         + _("Stop them, or keep them running (reattach later from Runs)?"))
            with Horizontal(classes="dialog-buttons"):
                yield Button(_("Stop and quit (s)"), id="stop", variant="error")
                yield Button(_("Keep running, quit (k)"), id="leave", variant="primary")
                yield Button(_("Stay (esc)"), id="cancel")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(None if event.button.id == "cancel" else event.button.id)

    def action_choose(self, choice: str) -> None:
        self.dismiss(choice)

    def action_cancel(self) -> None:
        self.dismiss(None)
