"""Stack capture on real rank processes started by the launcher (torchrun, the rank wrapper, the hook).

The ranks here sleep in a tiny script (no torch import: the capture, not the training, is under
test). Bad input is real too: a process that is gone, py-spy run as another user (no ptrace rights,
as in a container without SYS_PTRACE), a run dir whose stacks folder cannot be created.
The capture finds the ranks through the records the rank wrapper writes, not through torchrun: eight ranks
are started by torchrun, the other tests' by the stand-in torchrun (`standin_torchrun`), whose ranks are the
same wrapped processes without the agent's `import torch`.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mgtutor.diagnostics.failures.hang.stack_dumps import parse_rank_file
from mgtutor.training.runs.launch.launcher import LaunchSpec, Run, launch
from mgtutor.training.runs.records.record import RunRecord
from mgtutor.training.runs.forensics.stacks import PYSPY_ENV, _pyspy, capture_stacks, list_captures, pyspy_path
from tests.helpers import wait_for

pytestmark = pytest.mark.integration

SLEEPER = """import os, sys, time
def wait_here():
    time.sleep(600)
if os.environ["RANK"] == os.environ.get("EXIT_RANK"):
    sys.exit(0)
print("ready", flush=True)
wait_here()
"""


def start(tmp_path: Path, nproc: int, **env: str) -> Run:
    script = tmp_path / "sleeper.py"
    script.write_text(SLEEPER)
    root = tmp_path / "runs"
    run = launch(LaunchSpec(target=[str(script)], nproc=nproc, backend="gloo", env=env), root)
    assert run.record.meta().env["MGTUTOR_STACKS_LIVE"] == str(run.record.path / "stacks" / "live")
    expected = nproc - (1 if "EXIT_RANK" in env else 0)

    def settled() -> bool:
        ready = sum("ready" in p.read_text() for r, s, p in run.record.rank_logs() if s == "stdout")
        infos = run.record.ranks()
        exited = all(i.ended is not None for i in infos if str(i.rank) == env.get("EXIT_RANK"))
        return ready >= expected and len(infos) >= nproc and exited

    wait_for(settled, 120, interval=0.2, what="every rank ready (and EXIT_RANK gone)")
    return run


def test_eight_ranks_by_py_spy_and_by_the_hook(tmp_path):
    run = start(tmp_path, 8)
    try:
        for method in ("py-spy", "signal"):
            capture = capture_stacks(run.record, reason=f"test {method}", method=method)
            assert capture.missing == [], capture.missing
            mains = [p for p in capture.processes if p.role == "main"]
            assert sorted(p.rank for p in mains) == list(range(8))
            assert {p.method for p in mains} == {"py-spy" if method == "py-spy" else "signal"}
            for rank in range(8):
                procs = parse_rank_file((capture.path / f"rank{rank}.txt").read_text())
                frames = procs[0].main_thread().frames
                assert [f.short_name for f in frames[:2]] == ["wait_here", "<module>"], frames
            print(f"{method}: 8 ranks in {capture.seconds:.3f} s")
        assert [p.name.endswith(("py-spy", "signal")) for p in list_captures(run.record)] == [True, True]
    finally:
        assert run.stop(grace=5).stop.clean


def test_native_frames_beside_the_python_ones(tmp_path, standin_torchrun):
    run = start(tmp_path, 2)
    try:
        capture = capture_stacks(run.record, reason="test native", native=True)
    finally:
        run.stop(grace=5)
    assert capture.missing == [], capture.missing
    mains = [p for p in capture.processes if p.role == "main"]
    assert len(mains) == 2 and all(p.native and p.method == "py-spy" for p in mains)
    for rank in range(2):
        text = (capture.path / f"rank{rank}.txt").read_text()
        assert "    [native] " in text, text  # the C frames under time.sleep (libc's nanosleep)
        frames = parse_rank_file(text)[0].main_thread().frames
        assert [f.short_name for f in frames[:2]] == ["wait_here", "<module>"], frames  # still the user's line
    index = json.loads((capture.path / "index.json").read_text())
    assert [p["native"] for p in index["processes"] if p["role"] == "main"] == [True, True]


def test_a_rank_that_exited_and_a_process_that_is_gone(tmp_path, standin_torchrun):
    run = start(tmp_path, 2, EXIT_RANK="1")
    try:
        capture = capture_stacks(run.record)
        assert [p.rank for p in capture.processes] == [0]
        assert capture.missing == ["rank 1: exited (exit code 0) before the capture"]
    finally:
        run.stop(grace=5)
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    text, problem = _pyspy(pyspy_path(), gone.pid)
    assert text is None and problem == "the process exited while its stack was taken"


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root to run py-spy as nobody")
def test_no_ptrace_rights_falls_back_to_the_hook(tmp_path, standin_torchrun):
    wrapper = tmp_path / "py-spy-as-nobody"
    wrapper.write_text(f"#!/bin/sh\nexec setpriv --reuid=65534 --regid=65534 --clear-groups {pyspy_path()} \"$@\"\n")
    wrapper.chmod(0o755)
    run = start(tmp_path, 2)
    try:
        os.environ[PYSPY_ENV] = str(wrapper)
        capture = capture_stacks(run.record)
        native = capture_stacks(run.record, native=True)
    finally:
        os.environ.pop(PYSPY_ENV, None)
        run.stop(grace=5)
    mains = [p for p in capture.processes if p.role == "main"]
    assert {p.method for p in mains} == {"signal"}
    assert all(p.problem.startswith("py-spy: no ptrace rights") for p in mains), [p.problem for p in mains]
    assert capture.missing == []
    assert {p.method for p in native.processes if p.role == "main"} == {"signal"}  # the Python stack still comes
    assert len(native.missing) == 2, native.missing
    assert all("no native frames (py-spy --native: no ptrace rights" in m for m in native.missing), native.missing


def test_a_run_dir_where_nothing_can_be_written(tmp_path, standin_torchrun):
    run = start(tmp_path, 2)
    try:
        stacks = run.record.path / "stacks"
        stacks.rename(tmp_path / "moved-away")  # the hook's files go with it
        stacks.write_text("in the way")  # mkdir fails here as it would in a read-only run dir
        by_hook = capture_stacks(run.record, method="signal")
        capture = capture_stacks(run.record)
    finally:
        run.stop(grace=5)
    assert capture.path is None
    assert any(m.startswith("stacks not saved: cannot write") for m in capture.missing)
    assert all(p.method == "py-spy" for p in capture.processes)  # still in memory, and in the report
    assert by_hook.processes and all(p.method is None for p in by_hook.processes)
    assert all("stack hook: not loaded in this process" in p.problem for p in by_hook.processes)
    record = RunRecord(tmp_path / "elsewhere")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "meta.json").write_text("{}")
    empty = capture_stacks(record)
    assert empty.processes == [] and empty.path is not None
