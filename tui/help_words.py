"""argparse's own words under `--help` ("usage:", "options", "show this help message and exit") in the
language in force. argparse asks the stdlib's global gettext domain, which follows only the locale
variables; mgtutor's choice (`--lang`, the kept setting) must win, so the parser tree is relabelled
once it is built. Error messages keep argparse's English."""
from __future__ import annotations

import argparse
from typing import Any, cast

from mgtutor.training.runs.i18n import N_, _, current_language

USAGE, POSITIONALS, OPTIONALS, HELP = (N_("usage: "), N_("positional arguments"), N_("options"),
                                       N_("show this help message and exit"))


class _SaysUsage(argparse.HelpFormatter):
    def add_usage(self, usage: Any, actions: Any, groups: Any, prefix: str | None = None) -> None:
        super().add_usage(usage, actions, groups, _(USAGE) if prefix is None else prefix)


def say_help_words(parser: argparse.ArgumentParser) -> None:
    """Relabel this parser and every subcommand's parser below it; nothing to do in English."""
    if current_language() == "en":
        return
    seen: set[int] = set()
    todo = [parser]
    while todo:
        each = todo.pop()
        if id(each) in seen:
            continue
        seen.add(id(each))
        formatter = each.formatter_class
        if isinstance(formatter, type) and not issubclass(formatter, _SaysUsage):
            each.formatter_class = cast(Any, type(formatter.__name__, (_SaysUsage, formatter), {}))
        each._positionals.title = _(POSITIONALS)
        each._optionals.title = _(OPTIONALS)
        for action in each._actions:
            if isinstance(action, argparse._HelpAction):
                action.help = _(HELP)
            elif isinstance(action, argparse._SubParsersAction):
                todo.extend(action.choices.values())
