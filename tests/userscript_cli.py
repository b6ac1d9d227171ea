"""The CLI for the tests of a user's own script (check --fix, convert, the diagnoses of its real runs).

`mgtutor run` is a process, as the user starts it, on a machine without a GPU whatever machine runs the test:
its ranks start through the launcher the test chose (the stand-in where the test takes `standin_torchrun`, the
real torchrun where it passes `torchrun=True`). The commands that start no process (check --fix, convert,
diagnose) go through the CLI's main in the test's own process, where a process of their own would cost half a
CPU-second of start-up and imports; each is still started as a process where the user's whole path is walked
(check --fix: test_check_fix_runs.py's [seed-demo], convert: test_convert_runs.py's first test, diagnose:
test_failures_cli.py)."""
from __future__ import annotations

import subprocess
from contextlib import chdir
from pathlib import Path

import pytest

from conftest import mgtutor_argv, no_gpu_env
from mgtutor.training.runs.launch.launcher import LAUNCHER_ENV


def mgtutor(*args: str, cwd: Path | None = None, torchrun: bool = False, **env: str
            ) -> subprocess.CompletedProcess[str]:
    """`mgtutor ARGS` as a process with no GPU; `torchrun`: its ranks start through the real torchrun even where
    the test chose the stand-in."""
    environ = no_gpu_env() | {"CUDA_VISIBLE_DEVICES": ""} | env
    if torchrun:
        environ.pop(LAUNCHER_ENV, None)
    return subprocess.run(mgtutor_argv(*args), capture_output=True, text=True, timeout=300, env=environ, cwd=cwd)


def in_process(capsys: pytest.CaptureFixture[str], *args: str, cwd: Path | None = None) -> tuple[int, str]:
    """`mgtutor ARGS` through the CLI's main in this process, in `cwd`: its exit code and what it printed."""
    from mgtutor.tui.cli import main as cli_main

    capsys.readouterr()
    with chdir(cwd or Path.cwd()):
        code = cli_main(list(args))
    return code, capsys.readouterr().out
