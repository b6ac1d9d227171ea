"""A flag table both argparse (the CLI) and `parse_words` (a screen's input line) read."""
from __future__ import annotations

import argparse
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from mgtutor.training.foundation.i18n import _


class OptionError(ValueError):
    """A value that cannot be used; the message (one line) says what to give instead."""


@dataclass(frozen=True)
class Flag:
    names: tuple[str, ...]
    dest: str
    help: str
    convert: Callable[[str], Any] | None = None  # None: a switch that takes no value
    metavar: str | None = None
    choices: tuple[str, ...] | None = None
    repeat: bool = False  # may be given several times; the values make a list

    def value(self, text: str) -> Any:
        if self.choices is not None and text not in self.choices:
            raise OptionError(_("{flag} must be one of {choices} (got {text!r})").format(
                flag=self.names[-1], choices=", ".join(self.choices), text=text))
        if self.convert is None:
            return text
        try:
            return self.convert(text)
        except (OptionError, ValueError) as exc:
            raise OptionError(f"{self.names[-1]}: {exc}") from None


def add_flags(parser: argparse.ArgumentParser | argparse._ArgumentGroup, flags: Sequence[Flag],
              defaults: Any) -> None:
    """Add `flags` to an argparse parser; `defaults` (the options dataclass) gives each default."""
    for flag in flags:
        default = getattr(defaults, flag.dest)
        if flag.convert is None and flag.choices is None:
            parser.add_argument(*flag.names, dest=flag.dest, action="store_true", help=_(flag.help))
            continue
        parser.add_argument(*flag.names, dest=flag.dest, type=_argparse_type(flag),
                            default=None if flag.repeat else default,  # argparse appends to a default list
                            metavar=flag.metavar, help=_(flag.help),
                            action="append" if flag.repeat else "store")


def _argparse_type(flag: Flag) -> Callable[[str], Any]:
    def convert(text: str) -> Any:
        try:
            return flag.value(text)
        except OptionError as exc:
            raise argparse.ArgumentTypeError(str(exc).split(": ", 1)[-1]) from None
    return convert


def parse_words(words: str, flags: Sequence[Flag]) -> dict[str, Any]:
    """The values given in `words` (as typed on a command line), by dest; OptionError for anything else."""
    try:
        tokens = shlex.split(words)
    except ValueError as exc:
        raise OptionError(_("cannot read the options: {error}").format(error=exc)) from None
    by_name = {name: flag for flag in flags for name in flag.names}
    values: dict[str, Any] = {}
    i = 0
    while i < len(tokens):
        token = tokens[i]
        name, _eq, attached = token.partition("=") if token.startswith("--") else (token, "", "")
        flag = by_name.get(name)
        if flag is None:
            known = " ".join(f.names[-1] for f in flags)
            raise OptionError(_("unknown option {option!r} (known: {known})").format(option=token, known=known))
        if flag.convert is None and flag.choices is None:
            values[flag.dest] = True
            i += 1
            continue
        if attached:
            text = attached
        elif i + 1 < len(tokens):
            i += 1
            text = tokens[i]
        else:
            raise OptionError(_("{flag} needs a value").format(flag=name))
        value = flag.value(text)
        if flag.repeat:
            values.setdefault(flag.dest, []).append(value)
        else:
            values[flag.dest] = value
        i += 1
    return values


def positive_int(text: str) -> int:
    value = int(text) if text.strip().lstrip("-").isdigit() else -1
    if value < 1:
        raise OptionError(_("must be a whole number of at least 1 (got {text!r})").format(text=text))
    return value


def seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if value <= 0:
        raise OptionError(_("must be a number of seconds above 0 (got {text!r})").format(text=text))
    return value


def rank_number(text: str) -> int:
    if not text.strip().isdigit():
        raise OptionError(_("must be a rank number, 0 or more (got {text!r})").format(text=text))
    return int(text)
