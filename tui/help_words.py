"""argparse's own words in the language in force: under `--help` ("usage:", "options", "show this help
message and exit") and in its errors ("invalid choice", "the following arguments are required").
argparse asks the stdlib's global gettext domain, which follows only the locale variables; mgtutor's
choice (`--lang`, the kept setting) must win, so argparse's two lookups are pointed at mgtutor's
catalogue. In English they give back argparse's own words, unchanged."""
from __future__ import annotations

import argparse
import re

from rich.cells import cell_len

from mgtutor.training.foundation.i18n import N_, _, current_language

# argparse's msgids that a user of mgtutor can meet (Python 3.10 to 3.13), marked here for the catalogue.
ARGPARSE_WORDS = (
    N_("usage: "), N_("positional arguments"), N_("options"), N_("optional arguments"),
    N_("show this help message and exit"), N_("subcommands"),
    N_("%(prog)s: error: %(message)s\n"), N_("argument %(argument_name)s: %(message)s"),
    N_("invalid choice: %(value)r (choose from %(choices)s)"), N_("invalid %(type)s value: %(value)r"),
    N_("the following arguments are required: %s"), N_("one of the arguments %s is required"),
    N_("unrecognized arguments: %s"), N_("not allowed with argument %s"), N_("ignored explicit argument %r"),
    N_("expected one argument"), N_("expected at most one argument"), N_("expected at least one argument"),
    N_("expected %s argument"), N_("expected %s arguments"),
    N_("ambiguous option: %(option)s could match %(matches)s"), N_("unexpected option string: %s"),
    N_("unknown parser %(parser_name)r (choices: %(choices)s)"), N_("can't open '%(filename)s': %(error)s"),
)


def _plural(singular: str, plural: str, count: int) -> str:
    return _(singular if count == 1 else plural)  # Chinese has one form; each English form is its own message


def speak_argparse() -> None:
    """Send argparse's lookups to mgtutor's catalogue; call before a parser is built, since argparse
    reads its group titles and the help flag's text then."""
    argparse._ = _  # type: ignore[attr-defined]
    argparse.ngettext = _plural  # type: ignore[attr-defined]


# What a line may not break inside: an opening bracket with the character after it, a run of Latin text
# (a word, a flag, a path), one wide character.
_PIECES = re.compile(r"[^\s\u2e80-\uffff]*[(\[「（][\u2e80-\uffff]|[^\s\u2e80-\uffff]+|[\u2e80-\uffff]")
_NO_LINE_START = set("，。；：、！？）」")  # Chinese punctuation stays at the end of the line before


def wrap_cells(text: str, width: int) -> list[str]:
    """`text` (whitespace already collapsed) in lines of at most `width` cells, broken between words
    or between two Chinese characters; textwrap counts characters, which doubles a Chinese line."""
    lines: list[str] = []
    line, spaced = "", False
    for match in _PIECES.finditer(text):
        piece = match.group()
        spaced = match.start() > 0 and text[match.start() - 1] == " "
        joined = line + (" " if spaced and line else "") + piece
        if line and cell_len(joined) > width and piece not in _NO_LINE_START:
            lines.append(line)
            line = piece
        else:
            line = joined
    return lines + [line] if line else lines


class _WrapsByCells(argparse.HelpFormatter):
    """Help text wrapped to the terminal's width in cells; raw descriptions stay as they are."""

    def _split_lines(self, text: str, width: int) -> list[str]:
        return wrap_cells(self._whitespace_matcher.sub(" ", text).strip(), width)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if isinstance(self, argparse.RawDescriptionHelpFormatter):
            return super()._fill_text(text, width, indent)
        flat = self._whitespace_matcher.sub(" ", text).strip()
        return "\n".join(indent + line for line in wrap_cells(flat, width - len(indent)))


def wrap_by_cells(parser: argparse.ArgumentParser) -> None:
    """Give this parser and every subcommand's parser below it the cell-measuring formatter; in English
    (one cell a character) argparse's own wrapping stays."""
    if current_language() == "en":
        return
    todo = [parser]
    while todo:
        each = todo.pop()
        formatter = each.formatter_class
        if isinstance(formatter, type) and not issubclass(formatter, _WrapsByCells):
            each.formatter_class = type(formatter.__name__, (_WrapsByCells, formatter), {})  # type: ignore[assignment]
        for action in each._actions:
            if isinstance(action, argparse._SubParsersAction):
                todo.extend(action.choices.values())
