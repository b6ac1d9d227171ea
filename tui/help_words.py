"""argparse's own words in the language in force: under `--help` ("usage:", "options", "show this help
message and exit") and in its errors ("invalid choice", "the following arguments are required").
argparse asks the stdlib's global gettext domain, which follows only the locale variables; mgtutor's
choice (`--lang`, the kept setting) must win, so argparse's two lookups are pointed at mgtutor's
catalogue. In English they give back argparse's own words, unchanged."""
from __future__ import annotations

import argparse
import re
from collections.abc import Iterator
from typing import Any

from mgtutor.training.foundation.i18n import N_, _, cell_width, current_language
from mgtutor.training.foundation.linebreak import wrap_cells

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
SECTION_TITLE = N_("%(heading)s:")  # Python 3.13 asks for it; earlier ones write it, and _WrapsByCells translates it


def _plural(singular: str, plural: str, count: int) -> str:
    return _(singular if count == 1 else plural)  # Chinese has one form; each English form is its own message


def speak_argparse() -> None:
    """Send argparse's lookups to mgtutor's catalogue; call before a parser is built, since argparse
    reads its group titles and the help flag's text then."""
    argparse._ = _  # type: ignore[attr-defined]
    argparse.ngettext = _plural  # type: ignore[attr-defined]


class _WrapsByCells(argparse.HelpFormatter):
    """Help laid out by terminal cells: text wrapped by cells (raw descriptions stay as they are), the
    usage's continuation lines under its first argument (用法： is 3 characters but 6 cells), and section
    titles with the colon of the language ("选项：")."""

    def _split_lines(self, text: str, width: int) -> list[str]:
        return wrap_cells(self._whitespace_matcher.sub(" ", text).strip(), width)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if isinstance(self, argparse.RawDescriptionHelpFormatter):
            return super()._fill_text(text, width, indent)
        flat = self._whitespace_matcher.sub(" ", text).strip()
        return "\n".join(indent + line for line in wrap_cells(flat, width - len(indent)))

    def _format_usage(self, usage: Any, actions: Any, groups: Any, prefix: str | None) -> str:
        said = _("usage: ") if prefix is None else prefix
        stand_in = " " * cell_width(said)  # argparse indents by len(prefix): give it one char per cell
        return said + super()._format_usage(usage, actions, groups, stand_in)[len(stand_in):]

    def start_section(self, heading: str | None) -> None:
        self._headings = [*getattr(self, "_headings", []), heading]
        super().start_section(heading)

    def format_help(self) -> str:
        text = super().format_help()
        for heading in {h for h in getattr(self, "_headings", []) if h}:  # Python < 3.13 writes "%s:"
            titled = _(SECTION_TITLE) % {"heading": heading}
            text = re.sub(rf"(?m)^( *){re.escape(heading)}:$", lambda found: found.group(1) + titled, text)
        return text


def _parsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    """This parser and every subcommand's parser below it."""
    todo = [parser]
    while todo:
        each = todo.pop()
        yield each
        for action in each._actions:
            if isinstance(action, argparse._SubParsersAction):
                todo.extend(action.choices.values())


def name_positionals(parser: argparse.ArgumentParser) -> None:
    """A positional argument with choices and no metavar is named in errors by its dest ("argument
    action: invalid choice"), a name the user never sees; name it as the usage shows it, {list,show,…}."""
    for each in _parsers(parser):
        for action in each._actions:
            if not action.option_strings and action.choices and action.metavar is None:
                action.metavar = "{" + ",".join(map(str, action.choices)) + "}"


def wrap_by_cells(parser: argparse.ArgumentParser) -> None:
    """Give this parser and every subcommand's parser below it the cell-measuring formatter; in English
    (one cell a character) argparse's own layout stays."""
    if current_language() == "en":
        return
    for each in _parsers(parser):
        formatter = each.formatter_class
        if isinstance(formatter, type) and not issubclass(formatter, _WrapsByCells):
            each.formatter_class = type(formatter.__name__, (_WrapsByCells, formatter), {})  # type: ignore[assignment]
