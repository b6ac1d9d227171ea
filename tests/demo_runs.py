"""The crash demo in Chinese, made once per test worker (issue 41).

`zh_demo_crash_run`: `mgtutor --lang zh demo crash --nproc 2` (the real trainer on two gloo ranks, rank 1
raising at step 3), with its own XDG homes. test_demos.py checks on it what every demo must do (it ran for
real, streamed its lines, ended, and the classifier named rank 1's failure first, through `mgtutor diagnose
--json`); the Chinese leak test of every command (test_zh_every_command_runs.py::test_demo_and_bench_allreduce)
can read what it printed instead of making the same run again. Tests that take it carry
@pytest.mark.xdist_group("zh_demo_crash"), so one worker makes the run for all. Import the fixture into the
test module that uses it (`from tests.demo_runs import zh_demo_crash_run  # noqa: F401`)."""
from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import mgtutor_argv

HOMES = ("XDG_STATE_HOME", "XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME")
GROUP = "zh_demo_crash"


@dataclass(frozen=True)
class DemoRun:
    proc: subprocess.CompletedProcess[str]
    record: Path  # the run's folder ($MGTUTOR_RECORD_FILE: never read from the translated line)
    env: dict[str, str]  # the environment it ran with (its XDG homes): for commands that read its record


@pytest.fixture(scope="session")
def zh_demo_crash_run(tmp_path_factory: pytest.TempPathFactory) -> DemoRun:
    home = tmp_path_factory.mktemp("zh_demo_crash")
    kept = home / "record"
    env = {**os.environ, "LANGUAGE": "en", "MGTUTOR_NO_NVML": "1", "MGTUTOR_RECORD_FILE": str(kept),
           **{name: str(home / name.lower()) for name in HOMES}}
    proc = subprocess.run(mgtutor_argv("--lang", "zh", "demo", "crash", "--nproc", "2"), capture_output=True,
                          text=True, timeout=240, env=env, stdin=subprocess.DEVNULL)
    assert kept.is_file(), proc.stdout[-2000:] + proc.stderr[-2000:]
    return DemoRun(proc, Path(kept.read_text().strip()), env)
