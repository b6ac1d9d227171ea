"""The stack hook turns on faulthandler for fatal signals: a rank that dies of SIGSEGV in native code
writes "Fatal Python error: Segmentation fault" and every thread's stack into its stderr, a forked
worker too, and `mgtutor run` then names the error and the script's line. Real interpreters and a
real segmentation fault (ctypes reads address 0); the same script without the hook is the control. `mgtutor run`
starts its ranks through the stand-in torchrun (the crash and its stack are the rank's own; torchrun's report of a
failing rank: tests/test_cli_run.py's failing-rank tests)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import mgtutor_argv, no_gpu_env
from mgtutor.training.runs.forensics.stacks import HOOK_DIR, LIVE_ENV

pytestmark = pytest.mark.integration  # starts interpreters and runs

CRASHES = """import ctypes
import os
import sys


def read_address(address):
    return ctypes.string_at(address)


if sys.argv[1:] == ["fork"]:
    child = os.fork()
    if child == 0:
        read_address(0)
    os.waitpid(child, 0)
else:
    read_address(0)
"""
RANK_1_CRASHES = """import ctypes
import os
import time


def read_address(address):
    return ctypes.string_at(address)


if os.environ["RANK"] == "1":
    read_address(0)
time.sleep(60)
"""


def crash(tmp_path: Path, hooked: bool, *args: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "crashes.py"
    script.write_text(CRASHES)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONFAULTHANDLER", LIVE_ENV)}
    env["RANK"] = "0"
    if hooked:
        env |= {"PYTHONPATH": str(HOOK_DIR), LIVE_ENV: str(tmp_path / "live")}
    return subprocess.run([sys.executable, str(script), *args], env=env, capture_output=True, text=True, timeout=60)


def test_a_segfault_under_the_hook_writes_the_crashing_threads_stack_to_stderr(tmp_path: Path) -> None:
    bare = crash(tmp_path, hooked=False)
    assert bare.returncode == -signal.SIGSEGV and "Fatal Python error" not in bare.stderr  # what a rank had
    hooked = crash(tmp_path, hooked=True)
    assert hooked.returncode == -signal.SIGSEGV  # the signal still ends the process
    assert hooked.stderr.startswith("Fatal Python error: Segmentation fault")
    current = hooked.stderr.split("Current thread ", 1)[1]
    assert 'crashes.py", line 7 in read_address' in current and 'crashes.py", line 16 in <module>' in current


def test_a_forked_worker_that_crashes_writes_its_stack_too(tmp_path: Path) -> None:
    done = crash(tmp_path, True, "fork")
    assert done.returncode == 0, done.stderr  # the parent saw its child die and went on
    assert "Fatal Python error: Segmentation fault" in done.stderr
    assert 'crashes.py", line 7 in read_address' in done.stderr and 'line 13 in <module>' in done.stderr


def test_mgtutor_run_names_the_fatal_error_and_the_scripts_line(write_script, standin_torchrun) -> None:
    script = write_script("crash.py", RANK_1_CRASHES)
    proc = subprocess.run(mgtutor_argv("run", "--nproc", "2", "--", str(script)), capture_output=True, text=True,
                          timeout=180, env=no_gpu_env())
    assert proc.returncode == 128 + signal.SIGSEGV, proc.stderr
    assert ('diagnosis: child_failed (rank 1): Rank 1 failed first (signal SIGSEGV), with "Fatal Python error: '
            'Segmentation fault" in its log: the crash came from native code called at ctypes/') in proc.stderr
    assert "(your code: crash.py:7 in read_address)." in proc.stderr
    record = record_of(proc.stdout)
    shown = subprocess.run(mgtutor_argv("diagnose", record.name, "--json"), capture_output=True, text=True,
                           timeout=60, env=no_gpu_env())
    finding = json.loads(shown.stdout)["findings"][0]
    log = (record / "logs" / "rank1.stderr.log").read_text().splitlines()
    quoted = [log[ev["line"] - 1] for ev in finding["evidence"] if ev["file"] == "logs/rank1.stderr.log"]
    assert quoted[0] == "Fatal Python error: Segmentation fault"
    assert quoted[-1] == f'  File "{script}", line 7 in read_address'


def record_of(stdout: str) -> Path:
    (line,) = [line for line in stdout.splitlines() if line.startswith("run record: ")]
    return Path(line.removeprefix("run record: "))
