"""The footer every mode uses: compact (one space between keys), no command-palette key, so that at
80 columns `?`, `q` and the screen's own keys all fit; the rest of a screen's keys are listed by `?`.

Bindings keep their English descriptions (marked N_() where they are declared); the footer says them
in the language in force each time it is composed, which Textual does whenever the screen's bindings
change or it becomes current again: a language switch shows at the next one, without a restart.
"""
from __future__ import annotations

from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import Footer
from textual.widgets._footer import FooterKey
from textual.widgets._header import HeaderIcon

from mgtutor.training.foundation.i18n import N_, _

OPEN_PALETTE = N_("Open the command palette")  # the tooltip of the header's ⭘


class ModeFooter(Footer):
    def __init__(self) -> None:
        super().__init__(compact=True, show_command_palette=False)

    def compose(self) -> ComposeResult:
        for widget in super().compose():
            if isinstance(widget, FooterKey):
                widget.description = _(widget.description)
                if isinstance(widget.tooltip, str):
                    widget.tooltip = _(widget.tooltip)
            yield widget

    def on_mount(self) -> None:  # Footer's own on_mount runs too (Textual calls each class's handler)
        say_title(self.screen)
        self.call_after_refresh(say_title, self.screen)  # the header's ⭘ sets its English tooltip after this


def say_title(screen: object) -> None:
    """The screen's title (its class's TITLE, an English msgid) in the language in force, for the Header,
    and the tooltip of the header's ⭘ (Textual's English)."""
    title = getattr(type(screen), "TITLE", None)
    if isinstance(title, str) and title:
        setattr(screen, "title", _(title))
    for icon in screen.query(HeaderIcon) if isinstance(screen, Screen) else ():
        icon.tooltip = _(OPEN_PALETTE)
