"""Real 2-rank gloo jobs through the launcher: the run record, failures, stop, and lossless logs.

Where a test takes `either_launcher` it runs twice, through torchrun and through the torch-free stand-in
(tests/standin/torchrun.py): what the run layer's other tests take from the stand-in, torchrun does too."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import psutil
import pytest

from mgtutor.training.runs.launch import launcher
from mgtutor.training.runs.launch.launcher import LaunchError, LaunchSpec, Run, launch, plan
from mgtutor.training.runs.launch.procs import run_processes
from mgtutor.training.runs.records.record import RUN_ID_ENV, RunMeta, RunRecord, RunStatus
from mgtutor.training.runs.follow.runstate import RunStateFolder
from mgtutor.training.runs.follow.session import RunSession
from tests.helpers import wait_for

ALLREDUCE = """
import os, torch, torch.distributed as dist
dist.init_process_group(os.environ.get("MGTUTOR_BACKEND", "gloo"))
rank = dist.get_rank()
t = torch.tensor([rank + 1.0])
dist.all_reduce(t)
print(f"rank {rank} of {dist.get_world_size()} sum {t.item():.0f}")
dist.destroy_process_group()
"""

RANK1_EXITS_3 = """
import os, sys, time
if os.environ["RANK"] == "1":
    time.sleep(0.5)
    sys.exit(3)
time.sleep(120)
"""

HANGS = """
import time
print("started", flush=True)
time.sleep(600)
"""

NOISY = """
import os, sys
rank = os.environ["RANK"]
sys.stdout.write("x" * (100 * 1024) + "\\n")
for i in range(5):
    sys.stdout.write(f"progress {i}/5\\r")
sys.stdout.write("\\ndone\\n")
sys.stderr.write(f"warning from {rank}\\n")
sys.stdout.write("no newline at the end")
"""


IDENTITY = """
import json, os, sys
keys = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "ROLE_RANK")
print(json.dumps({"env": {k: os.environ.get(k) for k in keys}, "args": sys.argv[1:],
                  "master": bool(os.environ.get("MASTER_ADDR") and os.environ.get("MASTER_PORT")),
                  "wrapper_in_own_session": os.getsid(0) == os.getppid()}))
"""


@pytest.fixture(params=["torchrun", "stand-in"])
def either_launcher(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "stand-in":
        request.getfixturevalue("standin_torchrun")
    else:
        monkeypatch.delenv(launcher.LAUNCHER_ENV, raising=False)
    return request.param


def collect(run):
    lines = {}
    for update in RunSession(run.record, run).updates():
        for rank, stream, line in update.lines:
            lines.setdefault((rank, stream), []).append(line)
    return lines


@pytest.mark.integration
def test_two_ranks_allreduce_and_print(write_script):
    run = launch(LaunchSpec(target=[str(write_script("ar.py", ALLREDUCE))], nproc=2, backend="gloo", label="ar"))
    lines = collect(run)
    result = run.wait().to_json()  # the documented shape of result.json
    assert lines[(0, "stdout")] == ["rank 0 of 2 sum 3"]
    assert lines[(1, "stdout")] == ["rank 1 of 2 sum 3"]
    assert result["status"] == "finished"
    assert result["backend"] == "gloo"
    assert result["first_failure"] is None
    assert [(r["rank"], r["exit_code"], r["signal"]) for r in result["ranks"]] == [(0, 0, None), (1, 0, None)]
    meta = run.record.meta()
    assert meta.world_size == 2 and meta.backend == "gloo" and meta.ended and meta.problem is None
    assert "127.0.0.1:" in " ".join(meta.torchrun_argv)
    assert oct(run.record.path.stat().st_mode & 0o777) == "0o700"
    on_disk = json.loads((run.record.path / "result.json").read_text())
    assert on_disk["first_failure"] is None


@pytest.mark.integration
def test_each_rank_gets_its_identity_its_arguments_as_given_and_a_session_of_its_own(write_script, either_launcher):
    args = ["plain", "$$HOME", "${local_rank}", "a b"]
    run = launch(LaunchSpec(target=[str(write_script("identity.py", IDENTITY)), *args], nproc=2, backend="gloo"))
    lines = collect(run)
    assert run.wait(timeout=120).status == RunStatus.FINISHED
    for rank in (0, 1):
        seen = json.loads(lines[(rank, "stdout")][0])
        assert seen == {"env": {"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2",
                                "GROUP_RANK": "0", "ROLE_RANK": str(rank)},
                        "args": args, "master": True, "wrapper_in_own_session": True}, either_launcher


@pytest.mark.integration
def test_rank1_exit_3_fails_first_and_the_rest_are_stopped(write_script, either_launcher):
    run = launch(LaunchSpec(target=[str(write_script("fail.py", RANK1_EXITS_3))], nproc=2, backend="gloo"))
    result = run.wait(timeout=120).to_json()
    assert result["status"] == "failed"
    assert result["first_failure"] == {"rank": 1, "exit_code": 3, "signal": None}
    rank0 = result["ranks"][0]
    assert rank0["signal"] in ("SIGTERM", "SIGKILL") and rank0["outcome"] == "stopped after the first failure"
    assert not run_processes(run.record.run_id)


@pytest.mark.integration
def test_stop_ends_a_hanging_job_with_no_survivor(write_script, either_launcher):
    run = launch(LaunchSpec(target=[str(write_script("hang.py", HANGS))], nproc=2, backend="gloo"))
    wait_for(lambda: sum(1 for r in run.record.ranks() if r.pid) == 2, 60, what="both ranks' pids")
    rank_pids = [r.pid for r in run.record.ranks()]
    assert len(rank_pids) == 2 and all(psutil.pid_exists(p) for p in rank_pids)
    result = run.stop(grace=5).to_json()
    assert result["status"] == "stopped"
    assert result["stop"]["clean"] is True and result["stop"]["survivors"] == []
    assert not any(psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE for p in rank_pids)
    assert not run_processes(run.record.run_id)
    assert json.loads((run.record.path / "result.json").read_text())["status"] == "stopped"


@pytest.mark.integration
@pytest.mark.timeout(120)
def test_a_stop_is_the_end_of_the_run_only_once_its_report_is_in_the_result(tmp_path, monkeypatch):
    """The supervisor writes its `stopped` result as it exits; Run.stop adds its report only after,
    once it has seen that no process is left. Run.stop is held right there, after the real
    supervisor's write: a follower (another thread, as in the Monitor) must not take that result
    for the end, or it reads `stopped` with no report."""
    record = RunRecord.create("held-stop", tmp_path)
    torchrun = [sys.executable, "-c", "import time; time.sleep(120)"]  # stands in for torchrun: stops on SIGTERM
    record.write_meta(RunMeta.from_json({"run_id": record.run_id, "world_size": 1, "started": time.time(),
                                         "torchrun_argv": torchrun, "status": "running"}))
    supervisor = subprocess.Popen([sys.executable, "-m", "mgtutor.training.runs.launch.supervise", str(record.path)],
                                  env={**os.environ, RUN_ID_ENV: record.run_id}, stdout=subprocess.DEVNULL,
                                  start_new_session=True)
    run = Run(record, supervisor)
    wait_for(lambda: record.meta().torchrun_pid, 60, what="the supervisor's torchrun")
    held, go_on = threading.Event(), threading.Event()

    def last_look_held(run_id, root_pid=None, record=None):
        if root_pid is None:  # Run.stop's look for survivors: the supervisor is gone, the report unwritten
            held.set()
            go_on.wait(60)
        return run_processes(run_id, root_pid, record)

    monkeypatch.setattr(launcher, "run_processes", last_look_held)
    stopper = threading.Thread(target=run.stop, kwargs={"grace": 5})
    stopper.start()
    try:
        assert held.wait(60), "Run.stop never got to its look for survivors"
        written = record.saved_result()
        assert supervisor.poll() is not None and written.status == RunStatus.STOPPED and written.stop is None
        assert run.running() and record.status() == RunStatus.RUNNING and record.settled_result() is None
        assert not RunStateFolder(record, alive=run.running).refresh().done
    finally:
        go_on.set()
        stopper.join(60)
    result = run.wait(timeout=10)
    assert result.status == RunStatus.STOPPED and result.stop is not None and result.stop.clean is True
    state = RunStateFolder(record, alive=run.running).refresh()
    assert state.done and state.result.stop is not None


@pytest.mark.integration
def test_long_lines_and_carriage_returns_are_not_lost(write_script, standin_torchrun):
    run = launch(LaunchSpec(target=[str(write_script("noisy.py", NOISY))], nproc=2, backend="gloo"))
    lines = collect(run)
    run.wait()
    for rank in (0, 1):
        out = lines[(rank, "stdout")]
        assert out[0] == "x" * (100 * 1024)
        assert out[1:6] == [f"progress {i}/5" for i in range(5)]
        assert out[6:] == ["done", "no newline at the end"]
        assert lines[(rank, "stderr")] == [f"warning from {rank}"]
        on_disk = run.record.rank_log(rank, "stdout").read_bytes()
        assert on_disk.startswith(b"x" * (100 * 1024) + b"\n") and on_disk.endswith(b"no newline at the end")


def test_bad_input_is_refused_with_the_fix(monkeypatch, tmp_path):
    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")
    with pytest.raises(LaunchError, match="at least 1"):
        plan(LaunchSpec(target=["x.py"], nproc=0))
    with pytest.raises(LaunchError, match="unknown backend"):
        plan(LaunchSpec(target=["x.py"], backend="mpi"))
    with pytest.raises(LaunchError, match="--backend gloo"):
        plan(LaunchSpec(target=["x.py"], backend="nccl"))
    with pytest.raises(LaunchError, match="no such script"):
        launch(LaunchSpec(target=[str(tmp_path / "missing.py")], backend="gloo"))
    assert plan(LaunchSpec(target=["x.py"])).backend == "gloo" and plan(LaunchSpec(target=["x.py"])).nproc == 2
    assert os.listdir(tmp_path / "xdg_state_home") == []  # nothing created for refused input


def test_more_ranks_than_gpus_says_how_many_and_offers_gloo(monkeypatch):
    from mgtutor.training.runs.nvml import GpuInfo, Inventory
    from mgtutor.training.runs.launch import launcher

    two_gpus = Inventory(gpus=[GpuInfo(i, "NVIDIA H200", 143771, f"GPU-{i}") for i in range(2)], driver="580")
    monkeypatch.setattr(launcher, "inventory", lambda: two_gpus)  # the NVML boundary
    assert plan(LaunchSpec(target=["x.py"])).backend == "nccl" and plan(LaunchSpec(target=["x.py"])).nproc == 2
    with pytest.raises(LaunchError, match=r"more ranks than the 2 GPU\(s\).*--nproc 2.*--backend gloo"):
        plan(LaunchSpec(target=["x.py"], nproc=4))
    assert plan(LaunchSpec(target=["x.py"], nproc=4, backend="gloo")).nproc == 4


@pytest.mark.integration
def test_a_run_ends_and_stops_though_the_supervisors_popen_lock_was_left_taken(write_script, standin_torchrun):
    """Ctrl+C landing inside Popen.poll, between its waitpid lock's acquire and the `try` that frees it, leaves
    the lock taken (CPython); Popen.wait() then blocks on it for ever. The run's own wait and stop never take it."""
    ends = launch(LaunchSpec(target=[str(write_script("ends.py", "print('done')\n"))], nproc=2, backend="gloo"))
    assert ends.supervisor is not None and ends.supervisor._waitpid_lock.acquire(False)  # as the leak leaves it
    assert ends.wait(timeout=60).status == RunStatus.FINISHED
    goes = launch(LaunchSpec(target=[str(write_script("goes.py", "import time\ntime.sleep(600)\n"))], nproc=2,
                             backend="gloo"))
    assert goes.supervisor is not None and goes.supervisor._waitpid_lock.acquire(False)
    stopped = goes.stop(grace=5)
    assert stopped.status == RunStatus.STOPPED and stopped.stop is not None and stopped.stop.clean
    assert goes.wait(timeout=10).status == RunStatus.STOPPED
