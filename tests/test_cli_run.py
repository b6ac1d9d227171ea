"""`mgtutor run` and `mgtutor runs` as a user calls them: real processes, real signals."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import psutil

import pytest
from conftest import mgtutor_argv, no_gpu_env
from mgtutor.training.runs.launch.procs import run_processes

pytestmark = pytest.mark.integration  # starts processes

PRINTS = "import os\nprint('hello from', os.environ['RANK'])\n"
SLEEPS = "import time\nprint('ready', flush=True)\ntime.sleep(600)\n"
# rank 1 prints its traceback and exits 3: a code of its own, told apart from the 1 that mgtutor or torchrun may use
RAISES_3 = """import os, sys, time, traceback
if os.environ['RANK'] == '1':
    try:
        raise ValueError('bad batch')
    except ValueError:
        traceback.print_exc()
        sys.exit(3)
time.sleep(60)
"""


def run_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(mgtutor_argv(*args), capture_output=True, text=True, timeout=timeout, env=no_gpu_env())


def record_path(stdout: str) -> Path:
    lines = [line for line in stdout.splitlines() if line.startswith("run record: ")]
    assert len(lines) == 1, stdout
    return Path(lines[0].removeprefix("run record: "))


def test_run_prefixes_lines_and_ends_with_the_record(write_script, standin_torchrun):
    """mgtutor's own prefixes and record (the ranks through the torch-free stand-in; torchrun's own part of a
    run that ends well is test_launcher.py's two ranks that all-reduce and print)."""
    proc = run_cli("run", "--nproc", "2", "--", str(write_script("hello.py", PRINTS)))
    assert proc.returncode == 0, proc.stderr
    assert "[rank 0] hello from 0" in proc.stdout and "[rank 1] hello from 1" in proc.stdout
    assert proc.stdout.splitlines()[-1].startswith("run record: ")
    path = record_path(proc.stdout)
    assert Path(os.environ["XDG_STATE_HOME"]) in path.parents
    assert json.loads((path / "result.json").read_text())["backend"] == "gloo"


def test_run_exits_with_the_first_failing_ranks_code(write_script):
    """A failing run on torchrun with --verbose: torchrun's own traceback is printed whole too. Without --verbose it
    is one line: on the real torchrun, test_run_control.py::test_attach_follows_a_detached_run_then_prints_its_end
    (the same follow as `mgtutor run`'s); both forms of one run's lines: test_run_control.py::
    test_the_session_folds_torchruns_lines_only_and_verbose_keeps_them."""
    proc = run_cli("run", "--verbose", "--nproc", "2", "--", str(write_script("raises.py", RAISES_3)))
    assert proc.returncode == 3, proc.stderr
    assert "rank 1 failed first (exit code 3)" in proc.stderr
    assert "[rank 1] Traceback (most recent call last):" in proc.stdout  # the user's error: always whole
    assert "[rank 1] ValueError: bad batch" in proc.stdout
    assert "[torchrun] Traceback (most recent call last):" in proc.stdout  # --verbose: torchrun's own, whole
    assert "ChildFailedError" in proc.stdout
    assert "Traceback (most recent call last)" in (record_path(proc.stdout) / "torchrun.log").read_text()
    listed = run_cli("runs", "list", "--json")
    runs = json.loads(listed.stdout)
    assert runs[0]["status"] == "failed" and runs[0]["first_failure"]["rank"] == 1
    shown = run_cli("runs", "show", runs[0]["id"])
    assert "rank 1: exit 3 (failed)" in shown.stdout


def test_bad_input_gets_one_line_and_no_traceback(tmp_path):
    cases = [
        (["run", "--nproc", "0", "--", "x.py"], "at least 1"),
        (["run", "--backend", "mpi", "--", "x.py"], "--backend must be one of auto, nccl, gloo"),
        (["run", "--backend", "nccl", "--", "x.py"], "--backend gloo"),
        (["run", "--", str(tmp_path / "nope.py")], "no such script"),
        (["run"], "nothing to run"),
        (["runs", "show", "no-such-run"], "no single run matches"),
    ]
    for args, message in cases:
        proc = run_cli(*args, timeout=30)
        assert proc.returncode != 0, args
        assert message in proc.stderr + proc.stdout, (args, proc.stderr)
        assert "Traceback" not in proc.stderr


def test_ctrl_c_stops_every_rank(write_script):
    script = str(write_script("sleep.py", SLEEPS))
    cli = subprocess.Popen(mgtutor_argv("run", "--nproc", "2", "--", script),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=no_gpu_env(),
                           start_new_session=True)
    try:
        seen = 0
        deadline = time.monotonic() + 60
        while seen < 2 and time.monotonic() < deadline:
            line = cli.stdout.readline()
            seen += "ready" in line
        assert seen == 2
        os.killpg(cli.pid, signal.SIGINT)  # what the terminal sends on Ctrl+C
        out, err = cli.communicate(timeout=60)
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.wait()
    assert cli.returncode == 130
    assert "no process left" in err
    run_id = record_path(out).name
    assert not run_processes(run_id)
    assert not [p for p in psutil.process_iter(["cmdline"]) if script in " ".join(p.info["cmdline"] or [])]
