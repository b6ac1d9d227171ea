"""What Textual and Rich do in English that Chinese needs done otherwise: where a line may break, and
Textual's own words (the command palette that ctrl+p and the header's ⭘ open, its "No matches found", a
Select's "Dismiss menu").

Rich and Textual break lines at spaces only and fold a run without spaces at any cell, so a Chinese
paragraph (one such run) gets lines that start with "，" and identifiers cut in two ("NC|CL_DEBUG").
`install_line_breaking` gives both the breaking of `mgtutor.training.foundation.linebreak` for text with
wide characters; text without any keeps their own, unchanged.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import rich.text
import textual.content
from rich.align import Align
from rich.text import Text
from textual.app import App, SystemCommand
from textual.command import CommandList, CommandPalette
from textual.screen import Screen
from textual.widgets.option_list import Option

from mgtutor.training.foundation.i18n import N_, _
from mgtutor.training.foundation.linebreak import break_offsets

_english_divide_line = textual.content.divide_line


def divide_line(text: str, width: int, fold: bool = True) -> list[int]:
    """`rich._wrap.divide_line`'s contract (where each line after the first starts), with Chinese line
    breaking where the text holds a wide character."""
    if text.isascii():
        return _english_divide_line(text, width, fold=fold)
    return break_offsets(text, width, fold=fold)


def install_line_breaking() -> None:
    """Textual's Content and Rich's Text both wrap through `divide_line`: both get ours."""
    textual.content.divide_line = divide_line
    rich.text.divide_line = divide_line


# Textual's own words that a user of mgtutor meets, marked for the catalogue.
TEXTUAL_WORDS = {
    "Theme": N_("Theme"), "Change the current theme": N_("Change the current theme"),
    "Quit": N_("Quit"), "Quit the application as soon as possible": N_("Quit the application as soon as possible"),
    "Keys": N_("Keys"), "Hide the keys and widget help panel": N_("Hide the keys and widget help panel"),
    "Show help for the focused widget and a summary of available keys":
        N_("Show help for the focused widget and a summary of available keys"),
    "Minimize": N_("Minimize"), "Minimize the widget and restore to normal size":
        N_("Minimize the widget and restore to normal size"),
    "Maximize": N_("Maximize"), "Maximize the focused widget": N_("Maximize the focused widget"),
    "Screenshot": N_("Screenshot"),
    "Save an SVG 'screenshot' of the current screen": N_("Save an SVG 'screenshot' of the current screen"),
    "Dismiss menu": N_("Dismiss menu"),  # a Select's escape, said by the footer (ModeFooter translates it)
}
SEARCH_COMMANDS = N_("Search for commands...")
SEARCH_THEMES = N_("Search for themes...")
NO_MATCHES = N_("No matches found")


class PaletteInLanguage(CommandPalette):
    """Textual's command palette, its "No matches found" said in the language in force. Textual writes
    those words inside `_start_no_matches_countdown`; this is that method with them translated (the test
    of the palette in Chinese fails if a Textual release moves them)."""

    def _start_no_matches_countdown(self, search_value: str) -> None:
        self._stop_no_matches_countdown()

        def show_no_matches() -> None:
            if search_value:  # an empty search lists what can be discovered: nothing to say
                self.query_one(CommandList).add_option(
                    Option(Align.center(Text(_(NO_MATCHES), style="not bold")), disabled=True, id=self._NO_MATCHES))
            self._list_visible = bool(search_value)

        self._no_matches_timer = self.set_timer(self._NO_MATCHES_COUNTDOWN, show_no_matches)


class SaysTextualWords(App[Any]):
    """The App's command palette in the language in force: its placeholder and the system commands."""

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        for command in super().get_system_commands(screen):
            yield command._replace(title=_(TEXTUAL_WORDS.get(command.title, command.title)),
                                   help=_(TEXTUAL_WORDS.get(command.help, command.help)))

    def action_command_palette(self) -> None:
        if self.use_command_palette and not CommandPalette.is_open(self):
            self.push_screen(PaletteInLanguage(id="--command-palette", placeholder=_(SEARCH_COMMANDS)))

    def search_themes(self) -> None:
        from textual.theme import ThemeProvider

        self.push_screen(PaletteInLanguage(providers=[ThemeProvider], placeholder=_(SEARCH_THEMES)))
