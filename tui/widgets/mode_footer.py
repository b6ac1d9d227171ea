"""The footer every mode uses: compact (one space between keys), no command-palette key, so that at
80 columns `?`, `q` and the screen's own keys all fit; the rest of a screen's keys are listed by `?`."""
from __future__ import annotations

from textual.widgets import Footer


class ModeFooter(Footer):
    def __init__(self) -> None:
        super().__init__(compact=True, show_command_palette=False)
