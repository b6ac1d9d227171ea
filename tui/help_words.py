"""argparse's own words in the language in force: under `--help` ("usage:", "options", "show this help
message and exit") and in its errors ("invalid choice", "the following arguments are required").
argparse asks the stdlib's global gettext domain, which follows only the locale variables; mgtutor's
choice (`--lang`, the kept setting) must win, so argparse's two lookups are pointed at mgtutor's
catalogue. In English they give back argparse's own words, unchanged."""
from __future__ import annotations

import argparse

from mgtutor.training.runs.i18n import N_, _

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
