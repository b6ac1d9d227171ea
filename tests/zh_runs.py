"""Real runs in Chinese that more than one test reads, made once per test worker (issue 41).

`zh_bench_run`: `mgtutor --lang zh bench allreduce` of two gloo ranks (--check), with its own XDG homes: the
leak test of every command (test_zh_every_command_runs.py) reads what it printed, the diagnostics test
(test_i18n_diagnostics.py) its verdict line and the report it saved, in English. The tests that take it carry
@pytest.mark.xdist_group("zh_bench"), so one worker makes the run for both. Import the fixture into the test
module that uses it (`from tests.zh_runs import zh_bench_run  # noqa: F401`). A fixture imported into two modules
is two fixtures to pytest, one per module: the run itself is kept here, in MADE, so the second returns the first's."""
from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import homes_under, mgtutor_argv

BENCH = ("--lang", "zh", "bench", "allreduce", "--nproc", "2", "--backend", "gloo", "-b", "8", "-e", "1K", "-f", "128",
         "--iters", "2", "--warmup", "1", "--check")


@dataclass(frozen=True)
class ZhRun:
    proc: subprocess.CompletedProcess[str]
    homes: dict[str, str]  # the XDG homes it ran with: XDG_STATE_HOME holds what it saved


MADE: dict[str, ZhRun] = {}  # this worker's runs, whichever module's fixture made them


@pytest.fixture(scope="session")
def zh_bench_run(tmp_path_factory: pytest.TempPathFactory) -> ZhRun:
    if "bench" not in MADE:
        MADE["bench"] = bench(tmp_path_factory)
    return MADE["bench"]


def bench(tmp_path_factory: pytest.TempPathFactory) -> ZhRun:
    home = tmp_path_factory.mktemp("zh_bench")
    homes = homes_under(home)
    env = {**os.environ, "LANGUAGE": "en", "MGTUTOR_NO_NVML": "1", **homes}
    proc = subprocess.run(mgtutor_argv(*BENCH), capture_output=True, text=True, timeout=240, env=env,
                          stdin=subprocess.DEVNULL)
    return ZhRun(proc, homes)


def saved_in(run: ZhRun, monkeypatch: pytest.MonkeyPatch, kind: str) -> dict | None:
    """What the run saved for the Diagnostics screen (`kind`: doctor, allreduce, rendezvous), as it reads it."""
    from mgtutor.diagnostics.doctor.saved import load

    for name, path in run.homes.items():
        monkeypatch.setenv(name, path)
    assert Path(run.homes["XDG_STATE_HOME"]).is_dir(), run.proc.stderr
    return load(kind)
