"""The trainer's option help in the language in force, for `mgtutor train` and `mgtutor bench scaling`.

The options are defined once, in training/runs/launch/train_options.py (help marked with N_()), where the rank
processes parse them in English; here each help is translated as `--help` shows it."""
from __future__ import annotations

import argparse

from mgtutor.training.foundation.i18n import _
from mgtutor.training.runs.launch.train_options import add_train_options


def add_train_options_said(parser: argparse.ArgumentParser, skip: tuple[str, ...] = ()) -> None:
    """`add_train_options`, each option's help translated as it is added."""
    first = len(parser._actions)
    add_train_options(parser, skip)
    for action in parser._actions[first:]:
        action.help = _(action.help) if action.help else action.help
