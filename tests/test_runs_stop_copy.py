"""`runs stop` on a copy of a run's folder never stops the original (issue 46, item 15): a copy has the
same run id, and only processes started for the folder named are signalled (carries_run)."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from mgtutor.training.runs.launch.launcher import LaunchSpec, launch
from mgtutor.training.runs.launch.procs import run_processes
from mgtutor.training.runs.records.record import RunStatus
from tests.conftest import mgtutor_argv, no_gpu_env
from tests.helpers import wait_for

pytestmark = pytest.mark.integration

SLEEPER = """import time
print("up", flush=True)
time.sleep(300)
"""


def test_runs_stop_on_a_copy_of_a_running_runs_folder_leaves_the_original_running(
        tmp_path: Path, standin_torchrun: list[str]) -> None:
    script = tmp_path / "sleeper.py"
    script.write_text(SLEEPER)
    run = launch(LaunchSpec(target=[str(script)], nproc=2, backend="gloo"))
    try:
        wait_for(lambda: len(run.record.ranks()) == 2 and run.record.rank_log(1, "stdout").read_text(), 60,
                 what="both ranks up")
        before = {p.pid for p in run_processes(run.record.run_id)}
        copy = tmp_path / "copies" / run.record.run_id
        shutil.copytree(run.record.path, copy, ignore=shutil.ignore_patterns("*.pipe"))
        for command in (["runs", "stop", str(copy), "--grace", "1"], ["runs", "stop", str(copy), "--json"]):
            done = subprocess.run(mgtutor_argv(*command), env=no_gpu_env(), capture_output=True, text=True,
                                  timeout=120)
            assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
            assert '"signalled": 0' in done.stdout or "had already ended" in done.stdout, done.stdout
        assert run.running() and run.record.status() == RunStatus.RUNNING
        assert {p.pid for p in run_processes(run.record.run_id)} == before  # not one of them was touched
    finally:
        result = run.stop(grace=5)
    assert result.status == RunStatus.STOPPED and result.stop is not None and result.stop.clean
    assert not run_processes(run.record.run_id)
