"""Help: the keys of the screen the user came from, then the global ones, in one modal."""
from __future__ import annotations

from rich.console import Console
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Static

from mgtutor.training.foundation.i18n import N_, _

GLOBAL_KEYS = N_("""\
[b]Everywhere[/b]
  h  Home            l  Lessons        d  Diagnostics
  m  Monitor         t  Troubleshoot   r  Runs
  ?  this help       q  quit (asks first while your runs go)

Everything here is also a command: run `mgtutor --help` in a shell.
[dim]escape or ? closes this window[/dim]""")

# The dialog is 76 columns (tui/mgtutor.tcss): 68 inside its border, padding and scrollbar. Each key's
# words wrap within their own column (a Text cannot hang an indent), never back under the keys.
KEY_COLUMN = 8
DESCRIPTION_WIDTH = 68 - KEY_COLUMN
_CONSOLE = Console(width=80)  # only measures: it wraps by cells, so Chinese text wraps right too

KEY_NAMES = {"slash": "/", "left_square_bracket": "[", "right_square_bracket": "]", "enter": "enter",
             "escape": "esc", "question_mark": "?"}


def key_label(binding: Binding) -> str:
    if binding.key_display:
        return binding.key_display
    return ",".join(KEY_NAMES.get(key, key) for key in binding.key.split(","))


def screen_keys(bindings: list[BindingType]) -> list[tuple[str, str]]:
    """(key, what it does) for a screen's own bindings, hidden ones included: help is where they are found."""
    keys = []
    for binding in bindings:
        if isinstance(binding, Binding) and binding.description:
            keys.append((key_label(binding), _(binding.tooltip or binding.description)))
    return keys


def help_text(screen: Screen | None) -> Text:
    text = Text()
    title = screen.title if screen is not None and screen.title else _("this screen")
    keys = screen_keys(list(type(screen).BINDINGS)) if screen is not None else []
    text.append(_("mgtutor keys — {title}").format(title=title) + "\n", style="bold")
    for key, what in keys:
        text.append(f"  {key:<6}", style="bold cyan")
        for number, line in enumerate(Text(what).wrap(_CONSOLE, DESCRIPTION_WIDTH)):
            text.append(("" if number == 0 else " " * KEY_COLUMN) + line.plain + "\n")
    if not keys:
        text.append("  " + _("(no keys of its own)") + "\n", style="dim")
    text.append("\n")
    text.append_text(Text.from_markup(_(GLOBAL_KEYS)))
    return text


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape", "dismiss", N_("Close")), Binding("question_mark", "dismiss", N_("Close"))]

    def __init__(self, screen: Screen | None = None) -> None:
        super().__init__()
        self.for_screen = screen

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="dialog"):
            yield Static(help_text(self.for_screen), id="help-text")
