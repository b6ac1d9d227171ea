"""The CLI builds only the parser of the command it is given (a quick command does not pay for the imports of
the others), and every parser for the top-level help, the app and a word that is no command."""
from __future__ import annotations

import pytest

from mgtutor.tui.cli import build_parser, command_modules, named_command
from mgtutor.tui.commands import COMMAND_MODULES


@pytest.mark.parametrize("argv, name", [
    (["runs", "list"], "runs"),
    (["--lang", "zh", "runs", "list"], "runs"),
    (["--lang=zh", "check", "train.py"], "check"),
    (["slurm", "--nodes", "2"], "slurm"),
    (["run", "--", "train.py"], "run"),
    (["--help", "runs"], None),
    (["-h"], None),
    (["--", "runs"], None),
    (["--version"], None),
    ([], None),
])
def test_the_command_is_the_first_word_that_is_not_an_option(argv, name):
    assert named_command(argv) == name


def test_a_named_command_gets_only_its_own_module_and_anything_else_all():
    assert command_modules(["slurm", "--nodes", "2"]) == ["cluster.slurm"]
    assert command_modules(["--lang", "zh", "runs", "list"]) == ["runs"]
    assert command_modules(["rnus", "list"]) == COMMAND_MODULES  # the parser's error lists every command
    assert command_modules([]) == COMMAND_MODULES and command_modules(None) == COMMAND_MODULES


def test_the_parser_of_one_command_parses_it_as_the_whole_parser_does():
    argv = ["runs", "show", "latest"]
    one, whole = build_parser(argv), build_parser()
    assert set(one._subparsers._group_actions[0].choices) == {"runs"}  # type: ignore[union-attr]
    assert vars(one.parse_args(argv)) == vars(whole.parse_args(argv))


def test_a_mistyped_command_is_told_every_command_there_is(capsys):
    with pytest.raises(SystemExit):
        build_parser(["rnus"]).parse_args(["rnus"])
    said = capsys.readouterr().err
    assert "invalid choice: 'rnus'" in said and "'runs'" in said and "'check'" in said
