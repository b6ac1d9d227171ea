""""Default process group has not been initialized" in a script that `mgtutor run` started under torchrun, in
a real run: the diagnosis never says to launch with torchrun (it was), it names the `if` that skipped
init_process_group and why it was false here, and what it says to do makes the script train.

Every run is one rank. Failing, every rank skips init_process_group alike and fails at the same line, and the
diagnosis is read from one rank's traceback. Fixed, whether a rank joins is its own reading of its arguments (the
flag passed, or --local_rank taken from its own LOCAL_RANK), alike on every rank: the fixed run is the command the
diagnosis gives, as given (`--nproc 1`). On 2 ranks: that torchrun passes rank 1 no --local_rank and that a fixed
script's rank 1 reads 1 (test_check_fix_runs.py, `[local_rank_arg.py]`), a fixed script training under the real
torchrun (its `[seed-demo]`). Every run starts its ranks through the stand-in torchrun (the ranks are the real
script on real torch and gloo; what the diagnosis reads is the rank's traceback and mgtutor's own record of the
launch), and `check --fix` goes through the CLI's main in process."""
from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from tests.userscript_cli import in_process, mgtutor

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("standin_torchrun")]  # starts the stand-in's ranks

DATA = Path(__file__).parent / "data" / "run_failures"


def failed_diagnosis(tmp_path: Path, folder: str) -> tuple[Path, str, str]:
    """A copy of the folder, run on 1 rank: its train.py, and the diagnosis line and fix of its failure."""
    work = tmp_path / folder
    shutil.copytree(DATA / folder, work)
    failed = mgtutor("run", "--nproc", "1", "--", "train.py", cwd=work)
    assert failed.returncode != 0
    lines = (failed.stdout + failed.stderr).splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("diagnosis: "))
    assert lines[at].startswith("diagnosis: process_group_not_initialized")
    assert "Launch with torchrun" not in lines[at + 1]  # the advice for a plain `python train.py`
    return work / "train.py", lines[at], lines[at + 1]


def line_of(path: Path, text: str) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def test_a_flag_that_was_not_passed_is_named_and_passing_it_trains(tmp_path):
    script, summary, fix = failed_diagnosis(tmp_path, "init_flag")
    assert f"skipped init_process_group (train.py:{line_of(script, 'dist.init_process_group(')})" in summary
    assert f"`args.distributed` (train.py:{line_of(script, 'if args.distributed:')}) is true" in summary
    assert "--distributed was not passed (its default is False)" in summary
    assert f"train.py:{line_of(script, 'model = DDP(')} (`model = DDP(nn.Linear(8, 2))`) needed" in summary

    # the command names the --nproc of the run it diagnosed, and is run as given
    command = re.search(r"Pass --distributed: `mgtutor run (--nproc 1 -- train.py --distributed)`", fix)
    assert command, fix
    trained = mgtutor("run", *command[1].split(), cwd=script.parent)
    assert trained.returncode == 0, trained.stdout[-3000:]
    assert "trained 5 steps" in trained.stdout


def test_a_local_rank_argument_torchrun_never_passes_is_named_and_check_fix_makes_it_train(tmp_path, capsys):
    script, summary, fix = failed_diagnosis(tmp_path, "local_rank_init")
    assert f"`args.local_rank != -1` (train.py:{line_of(script, 'if args.local_rank')}) is true" in summary
    assert "--local_rank was not passed (its default is -1)" in summary
    assert "torchrun passes no --local_rank" in fix and f"`mgtutor check --fix {script}` writes it" in fix

    assert in_process(capsys, "check", "--fix", "train.py", cwd=script.parent)[0] in (0, 1)
    trained = mgtutor("run", "--nproc", "1", "--", "train.py", cwd=script.parent)
    assert trained.returncode == 0, trained.stdout[-3000:]
    assert "trained 5 steps" in trained.stdout
