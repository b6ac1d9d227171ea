"""The options every command shares (tui/commands/options.py): one name, one validation, one -o rule."""
from __future__ import annotations

import argparse
import os
from pathlib import Path

import pytest

from mgtutor.tui.cli import build_parser, main as cli_main
from mgtutor.tui.commands.options import write_output_file
from mgtutor.tui.errors import CliError

SCRIPT = ["--", "train.py"]

# Every command that asks for ranks, and what it needs besides --nproc to parse.
RANK_COMMANDS = [
    ["run", *SCRIPT], ["train"], ["fit", *SCRIPT], ["demo", "oom"], ["bench", "maxbatch"], ["bench", "allreduce"],
    ["doctor", "--rendezvous"],
]


def parse(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(list(argv))


@pytest.mark.parametrize("command", RANK_COMMANDS, ids=" ".join)
def test_every_command_that_asks_for_ranks_reads_nproc_alike(command: list[str]) -> None:
    head, tail = (command[:-2], command[-2:]) if command[-2:] == SCRIPT else (command, [])
    assert parse(*head, "--nproc", "3", *tail).nproc == 3


@pytest.mark.parametrize("command", RANK_COMMANDS, ids=" ".join)
@pytest.mark.parametrize("bad", ["0", "-1", "two"])
def test_a_bad_nproc_is_one_line_and_exit_2_in_every_command(command: list[str], bad: str, capsys) -> None:
    head, tail = (command[:-2], command[-2:]) if command[-2:] == SCRIPT else (command, [])
    with pytest.raises(SystemExit) as ended:
        parse(*head, "--nproc", bad, *tail)
    [line] = capsys.readouterr().err.splitlines()
    assert ended.value.code == 2
    prog = " ".join(word for word in head if word not in ("oom", "--rendezvous"))  # the command alone
    assert line == f"mgtutor {prog}: error: --nproc must be a whole number of at least 1 (got {bad!r})"


@pytest.mark.parametrize("head, tail", [(["run"], SCRIPT), (["fit"], SCRIPT), (["demo", "oom"], []),
                                        (["bench", "scaling"], []), (["bench", "allreduce"], []),
                                        (["lessons", "run", "5"], [])], ids=lambda words: " ".join(words))
def test_every_backend_flag_takes_the_same_choices(head: list[str], tail: list[str], capsys) -> None:
    assert parse(*head, "--backend", "gloo", *tail).backend == "gloo"
    with pytest.raises(SystemExit):
        parse(*head, "--backend", "mpi", *tail)
    assert "--backend must be one of auto, nccl, gloo (got 'mpi')" in capsys.readouterr().err


@pytest.mark.parametrize("command, dest", [(["run"], "nnodes"), (["slurm"], "nodes"),
                                           (["k8s", "--image", "img"], "nodes")], ids=lambda v: str(v))
def test_nodes_and_nnodes_are_the_same_option(command: list[str], dest: str) -> None:
    extra = ["--rdzv-endpoint", "h:1"] if command == ["run"] else []
    one = parse(*command, "--nodes", "3", *extra, *SCRIPT)
    other = parse(*command, "--nnodes", "3", *extra, *SCRIPT)
    assert getattr(one, dest) == getattr(other, dest) == 3


def test_the_rendezvous_port_is_rdzv_port_and_port_still_works() -> None:
    assert parse("slurm", "--rdzv-port", "29555", *SCRIPT).rdzv_port == 29555
    assert parse("slurm", "--port", "29555", *SCRIPT).rdzv_port == 29555


@pytest.mark.parametrize("argv", [["serve", "--port", "0"], ["doctor", "--serve", "--port", "70000"],
                                  ["slurm", "--rdzv-port", "x", *SCRIPT]], ids=" ".join)
def test_a_port_outside_1_to_65535_is_refused_in_one_line(argv: list[str], capsys) -> None:
    with pytest.raises(SystemExit) as ended:
        parse(*argv)
    assert ended.value.code == 2 and "must be a port number, 1…65535" in capsys.readouterr().err


def test_serve_and_doctor_serve_say_which_port_they_listen_on() -> None:
    helps = {name: build_parser()._subparsers._group_actions[0].choices[name].format_help()  # type: ignore[union-attr]
             for name in ("serve", "doctor")}
    assert "the port the web server listens on" in " ".join(helps["serve"].split())
    assert "the port this peer probe listens on" in " ".join(helps["doctor"].split())


def test_dash_o_dash_is_standard_output(capsys) -> None:
    assert write_output_file("job\n", "-", force=False) is None
    assert capsys.readouterr().out == "job\n"


def test_an_existing_file_is_refused_without_force_and_replaced_with_it(tmp_path: Path) -> None:
    target = tmp_path / "job.sbatch"
    target.write_text("old")
    with pytest.raises(CliError, match="is there already"):
        write_output_file("new", str(target), force=False)
    assert target.read_text() == "old"
    write_output_file("new", str(target), force=True)
    assert target.read_text() == "new"


def test_a_device_is_written_in_place_not_replaced() -> None:
    assert write_output_file("nothing\n", os.devnull, force=False) == Path(os.devnull)
    assert Path(os.devnull).is_char_device()


def test_a_commands_input_is_never_replaced_even_with_force(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("x = 1\n")
    with pytest.raises(CliError):
        write_output_file("y = 2\n", str(script), force=True, never=[script])
    assert script.read_text() == "x = 1\n"


@pytest.mark.parametrize("command", [["slurm"], ["k8s", "--image", "img"]], ids=" ".join)
def test_slurm_and_k8s_refuse_an_existing_file_unless_force(command: list[str], tmp_path: Path, capsys) -> None:
    out = tmp_path / "job"
    out.write_text("keep")
    assert cli_main([*command, "-o", str(out), *SCRIPT]) == 2
    assert out.read_text() == "keep" and "--force" in capsys.readouterr().err
    assert cli_main([*command, "-o", str(out), "--force", *SCRIPT]) == 0
    assert out.read_text() != "keep"


def test_convert_refuses_an_existing_file_unless_force_and_never_its_script(tmp_path: Path, capsys) -> None:
    script = tmp_path / "train.py"
    script.write_text("import torch\nmodel = torch.nn.Linear(2, 2)\nprint(model)\n")
    out = tmp_path / "train_ddp.py"
    out.write_text("keep")
    assert cli_main(["convert", str(script), "-o", str(out)]) == 2
    assert out.read_text() == "keep"
    assert cli_main(["convert", str(script), "-o", str(out), "--force"]) in (0, 1)
    assert "init_process_group" in out.read_text()
    assert cli_main(["convert", str(script), "-o", str(script), "--force"]) == 2
    assert "is SCRIPT itself" in capsys.readouterr().err and script.read_text().startswith("import torch\nmodel")


def test_convert_dash_o_dash_prints_only_the_script(tmp_path: Path, capsys) -> None:
    script = tmp_path / "train.py"
    script.write_text("import torch\nmodel = torch.nn.Linear(2, 2)\nprint(model)\n")
    capsys.readouterr()
    cli_main(["convert", str(script), "-o", "-"])
    out = capsys.readouterr().out
    assert "init_process_group" in out and "converted for DDP" not in out


@pytest.mark.parametrize("argv, action, lesson", [
    ([], "list", None), (["list"], "list", None), (["show", "5"], "show", "5"), (["run", "04"], "run", "04"),
    (["check", "05", "--solution"], "check", "05"), (["hint", "05"], "hint", "05"), (["reset", "05"], "reset", "05"),
])
def test_lessons_actions_are_subcommands_with_the_old_command_lines(argv: list[str], action: str,
                                                                   lesson: str | None) -> None:
    args = parse("lessons", *argv)
    assert (args.action, args.lesson) == (action, lesson)
    assert args.solution == ("--solution" in argv)


def test_lessons_json_is_read_before_or_after_the_action() -> None:
    assert parse("lessons", "--json").json and parse("lessons", "list", "--json").json
    assert parse("lessons", "--json", "show", "5").json and not parse("lessons", "show", "5").json


def test_an_unknown_lessons_action_is_refused(capsys) -> None:
    with pytest.raises(SystemExit) as ended:
        parse("lessons", "frob")
    assert ended.value.code == 2 and "frob" in capsys.readouterr().err
