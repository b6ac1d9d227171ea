"""Real runs in Chinese that more than one test reads, made once per test worker (issue 41).

`zh_bench_run`: `mgtutor --lang zh bench allreduce` of two gloo ranks (--check), with its own XDG homes: the
leak test of every command (test_zh_every_command_runs.py) reads what it printed, the diagnostics test
(test_i18n_diagnostics.py) its verdict line and the report it saved, in English. Its ranks start through the
stand-in torchrun: what both read is mgtutor's words and the ranks' own measurement (real torch and gloo); the
bench on the real torchrun is test_diagnostics_screen.py's. The tests that take it carry
@pytest.mark.xdist_group("zh_bench"), so one worker makes the run for both.

`zh_probe_run`: `mgtutor --lang zh doctor --rendezvous` of two gloo ranks, rank 1 told to stay away, on the real
torchrun (the rendezvous is torchrun's): the leak test reads what it printed, the diagnostics test its lines and
the report it kept, in English. Tests that take it carry @pytest.mark.xdist_group("zh_probe").

Import the fixtures into the test module that uses them (`from tests.zh_runs import zh_bench_run  # noqa: F401`).
A fixture imported into two modules is two fixtures to pytest, one per module: the runs themselves are kept here,
in MADE, so the second returns the first's."""
from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import STANDIN_LAUNCHER, homes_under, mgtutor_argv

BENCH = ("--lang", "zh", "bench", "allreduce", "--nproc", "2", "--backend", "gloo", "-b", "8", "-e", "1K", "-f", "128",
         "--iters", "2", "--warmup", "1", "--check")
PROBE_TIMEOUT_S = 5
PROBE = ("--lang", "zh", "doctor", "--rendezvous", "--backend", "gloo", "--nproc", "2", "--timeout",
         str(PROBE_TIMEOUT_S), "--skip-rank", "1")


@dataclass(frozen=True)
class ZhRun:
    proc: subprocess.CompletedProcess[str]
    homes: dict[str, str]  # the XDG homes it ran with: XDG_STATE_HOME holds what it saved


MADE: dict[str, ZhRun] = {}  # this worker's runs, whichever module's fixture made them


@pytest.fixture(scope="session")
def zh_bench_run(tmp_path_factory: pytest.TempPathFactory) -> ZhRun:
    if "bench" not in MADE:
        MADE["bench"] = run_in_chinese(tmp_path_factory.mktemp("zh_bench"), BENCH, standin=True)
    return MADE["bench"]


@pytest.fixture(scope="session")
def zh_probe_run(tmp_path_factory: pytest.TempPathFactory) -> ZhRun:
    if "probe" not in MADE:
        MADE["probe"] = run_in_chinese(tmp_path_factory.mktemp("zh_probe"), PROBE, standin=False)
    return MADE["probe"]


def run_in_chinese(home: Path, args: tuple[str, ...], standin: bool) -> ZhRun:
    from mgtutor.training.runs.launch.launcher import LAUNCHER_ENV

    homes = homes_under(home)
    env = {**os.environ, "LANGUAGE": "en", "MGTUTOR_NO_NVML": "1", **homes}
    env.pop(LAUNCHER_ENV, None)  # the real torchrun unless asked, whichever test asks first
    if standin:
        env[LAUNCHER_ENV] = STANDIN_LAUNCHER
    proc = subprocess.run(mgtutor_argv(*args), capture_output=True, text=True, timeout=240, env=env,
                          stdin=subprocess.DEVNULL)
    return ZhRun(proc, homes)


def saved_in(run: ZhRun, monkeypatch: pytest.MonkeyPatch, kind: str) -> dict | None:
    """What the run saved for the Diagnostics screen (`kind`: doctor, allreduce, rendezvous), as it reads it."""
    from mgtutor.diagnostics.doctor.saved import load

    for name, path in run.homes.items():
        monkeypatch.setenv(name, path)
    assert Path(run.homes["XDG_STATE_HOME"]).is_dir(), run.proc.stderr
    return load(kind)
