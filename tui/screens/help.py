"""Help: every key, in one modal."""
from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static

HELP = """\
[b]mgtutor keys[/b]

  h  Home            l  Lessons        d  Diagnostics
  m  Monitor         t  Troubleshoot   r  Runs
  ?  this help       q  quit (asks before stopping a run you started)

Every mode also lists its own keys in the footer.
Everything here is also a command: run `mgtutor --help` in a shell.

[dim]escape or ? closes this window[/dim]"""


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape", "dismiss", "Close"), Binding("question_mark", "dismiss", "Close")]

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(HELP)
