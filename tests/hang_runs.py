"""Real hangs through `mgtutor run`, and the hang that two tests read, made once per test worker (issue 41).

`Cli`: `mgtutor run` in its own session, stderr and stdout read line by line on threads, stopped with Ctrl+C.

`zh_slow_loader_run`: `mgtutor --lang zh run --nproc 2 --backend gloo -- hang.py --mode slow-loader` (lesson 14:
rank 1's data loader never returns), watched until its Chinese hang report and fix are printed, then Ctrl+C.
test_hang_cli.py::test_rank_stuck_in_its_data_loader_is_named checks on it what each real hang must do (the report
within 30 s of the ranks joining, the run going on after it, exit 130 with no process left, `mgtutor diagnose
--json` giving the same finding, the report's English from the saved capture); test_i18n_cli.py::
test_run_prints_its_hang_report_in_chinese_and_diagnose_json_stays_english its Chinese lines. Both carry
@pytest.mark.xdist_group("hang_slow_loader"), so one worker makes the run for both. Import the fixture into the test
module that uses it (`from tests.hang_runs import zh_slow_loader_run  # noqa: F401`); the run is kept here, in MADE,
so the second module's fixture returns the first's."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import REPO, homes_under, mgtutor_argv, no_gpu_env
from tests.helpers import wait_for

HANG = str(REPO / "lessons" / "14-when-it-goes-wrong" / "hang.py")
GROUP = "hang_slow_loader"
ZH_REPORT = "卡住报告 (有 rank 不在集合通信里)"  # hang report (rank_outside_collective), as --lang zh prints it
ZH_FIX = "解决：找出 rank 1 为什么没有走到这次集合通信"


class Cli:
    """`mgtutor run` in its own session; stderr is read line by line on a thread."""

    def __init__(self, *args: str, env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(mgtutor_argv(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     env=env or no_gpu_env(), start_new_session=True)
        self.err: list[str] = []
        self.out: list[str] = []
        self._threads = [threading.Thread(target=self._read, args=(s, d), daemon=True)
                         for s, d in ((self.proc.stderr, self.err), (self.proc.stdout, self.out))]
        for thread in self._threads:
            thread.start()

    @staticmethod
    def _read(stream, into: list[str]) -> None:
        for line in stream:
            into.append(line)

    def wait_for(self, text: str, after: str | None = None) -> float:
        """Seconds from `after` appearing on stdout (or from now) until `text` appears on stderr."""
        begun = time.monotonic()
        if after is not None:
            wait_for(lambda: self._shows(self.out, after), 300, what=f"{after!r} on stdout")
            begun = time.monotonic()
        wait_for(lambda: self._shows(self.err, text), 300, what=f"{text!r} on stderr")
        return time.monotonic() - begun

    def _shows(self, lines: list[str], text: str) -> bool:
        assert self.proc.poll() is None, "".join(self.err)
        return any(text in line for line in lines)

    def interrupt(self) -> str:
        os.killpg(self.proc.pid, signal.SIGINT)  # Ctrl+C in a terminal
        self.proc.wait(timeout=90)
        for thread in self._threads:
            thread.join(10)
        return "".join(self.err)

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def record(self) -> Path:
        """The run's folder, from the line that names it (English, or Chinese under --lang zh)."""
        prefixes = ("run record: ", "运行记录：")
        lines = [line for line in self.out if line.startswith(prefixes)]
        assert len(lines) == 1, "".join(self.out[-5:])
        path = lines[0].strip()
        for prefix in prefixes:
            path = path.removeprefix(prefix)
        return Path(path)


def diagnose_json(record: Path, env: dict[str, str] | None = None) -> dict:
    proc = subprocess.run(mgtutor_argv("diagnose", str(record), "--json"), capture_output=True, text=True,
                          timeout=120, env=env or no_gpu_env())
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@dataclass(frozen=True)
class HangRun:
    err: str                  # all it printed on stderr, Ctrl+C's lines included
    returncode: int
    record: Path              # the run's folder
    waited: float             # seconds from "rank 0: joined" on stdout until the hang report's first line
    went_on: bool             # the run was still going a second after the report
    processes_left: list      # the run's processes after it ended (run_processes)
    diagnosed: dict           # `mgtutor diagnose RECORD --json`


MADE: dict[str, HangRun] = {}  # this worker's runs, whichever module's fixture made them


@pytest.fixture(scope="session")
def zh_slow_loader_run(tmp_path_factory: pytest.TempPathFactory) -> HangRun:
    if "slow-loader" not in MADE:
        MADE["slow-loader"] = slow_loader_in_chinese(tmp_path_factory.mktemp("hang_slow_loader"))
    return MADE["slow-loader"]


def slow_loader_in_chinese(home: Path) -> HangRun:
    from mgtutor.training.runs.launch.launcher import LAUNCHER_ENV
    from mgtutor.training.runs.launch.procs import run_processes

    env = {**no_gpu_env(), "LANGUAGE": "en", **homes_under(home)}
    env.pop(LAUNCHER_ENV, None)  # the real torchrun, whichever test asks first
    cli = Cli("--lang", "zh", "run", "--nproc", "2", "--backend", "gloo", "--", HANG, "--mode", "slow-loader", env=env)
    try:
        waited = cli.wait_for(ZH_REPORT, after="rank 0: joined")
        cli.wait_for(ZH_FIX)
        time.sleep(1.0)  # the rest of the report
        went_on = cli.proc.poll() is None
        err = cli.interrupt()
    finally:
        cli.kill()
    record = cli.record()
    left = run_processes(record.name)
    return HangRun(err, cli.proc.returncode, record, waited, went_on, left, diagnose_json(record, env))
