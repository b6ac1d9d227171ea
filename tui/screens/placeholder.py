"""A mode whose content is not built yet: says what it will hold."""
from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Header, Static

from mgtutor.tui.widgets.mode_footer import ModeFooter


class PlaceholderScreen(Screen):
    TITLE = "Mode"
    ABOUT = ""

    def compose(self) -> ComposeResult:
        yield Header()
        with VerticalScroll(classes="mode-body"):
            yield Static(f"[b]{self.TITLE}[/b]", classes="section-title")
            yield Static(self.ABOUT)
            yield Static("This mode is not available in this version yet; its command-line "
                         "counterpart is listed in `mgtutor --help`.", classes="placeholder")
        yield ModeFooter()
