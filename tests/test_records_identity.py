"""Who a run's processes are, and what its record keeps (issue 27, items 4, 5, 7): a forged record
never gets a stranger signalled; a real run leaves only 0600 files in 0700 folders, no FIFO, and no
secret's value anywhere."""
from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import psutil
import pytest

from mgtutor.training.runs.launch.launcher import LaunchSpec, launch, recorded_env
from mgtutor.training.runs.records.record import RunMeta, RunRecord, RunStatus
from mgtutor.training.foundation.secrets import REDACTED
from mgtutor.tui.cli import main as cli_main

SECRET = "hunter2-s3cr3t-value"


def test_an_old_record_holding_a_secret_never_shows_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    record = RunRecord.create("old")
    record.write_meta(RunMeta(run_id=record.run_id, env={"TORCH_HUB_TOKEN": SECRET, "NCCL_DEBUG": "INFO"}))
    assert cli_main(["runs", "show", record.run_id, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["meta"]["env"] == {"TORCH_HUB_TOKEN": REDACTED, "NCCL_DEBUG": "INFO"}


def test_a_secret_under_a_recorded_prefix_is_kept_by_name_only() -> None:
    env = recorded_env({"TORCH_HUB_TOKEN": SECRET, "NCCL_IB_KEY": SECRET, "MASTER_PASSWORD": SECRET,
                        "MASTER_ADDR": "10.0.0.1", "NCCL_DEBUG": "INFO", "HOME": "/home/x"})
    assert env == {"MASTER_ADDR": "10.0.0.1", "MASTER_PASSWORD": REDACTED, "NCCL_DEBUG": "INFO",
                   "NCCL_IB_KEY": REDACTED, "TORCH_HUB_TOKEN": REDACTED}


@pytest.mark.integration
@pytest.mark.timeout(120)
def test_stop_on_a_forged_record_leaves_an_unrelated_process_alive(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """meta.json names a live `sleep` as its supervisor, with a start time that fits: no signal may reach it."""
    stranger = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        record = RunRecord.create("forged", tmp_path / "runs")
        made = psutil.Process(stranger.pid).create_time()
        record.write_meta(RunMeta.from_json({"run_id": record.run_id, "world_size": 1, "started": made,
                                             "status": "running", "supervisor_pid": stranger.pid,
                                             "pgid": stranger.pid, "torchrun_pid": stranger.pid}))
        assert record.supervisor_pid() is None and record.status() == RunStatus.LOST
        cli_main(["runs", "stop", str(record.path), "--grace", "1", "--json"])
        outcome = json.loads(capsys.readouterr().out)
        assert outcome["signalled"] == 0
        assert stranger.poll() is None and psutil.Process(stranger.pid).status() != psutil.STATUS_ZOMBIE
    finally:
        stranger.kill()
        stranger.wait()


@pytest.mark.integration
@pytest.mark.timeout(180)
def test_a_real_run_keeps_private_files_no_fifo_and_no_secret(write_script, monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str],
                                                             standin_torchrun: list[str]) -> None:
    """The record is mgtutor's: its ranks start through the stand-in torchrun."""
    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")
    monkeypatch.setenv("TORCH_HUB_TOKEN", SECRET)
    script = write_script("hello.py", "import os\nprint('rank', os.environ['RANK'], flush=True)\n")
    old = os.umask(0o022)
    try:
        run = launch(LaunchSpec(target=[str(script)], nproc=2, backend="gloo", label="private",
                                env={"NCCL_IB_KEY": SECRET}))
        result = run.wait(timeout=150)
    finally:
        os.umask(old)
    assert result.status == RunStatus.FINISHED
    found = []
    for folder, dirs, files in os.walk(run.record.path):
        for name in dirs:
            mode = os.lstat(os.path.join(folder, name)).st_mode
            assert stat.S_IMODE(mode) == 0o700, os.path.join(folder, name)
        for name in files:
            path = os.path.join(folder, name)
            mode = os.lstat(path).st_mode
            assert stat.S_ISREG(mode), f"{path} is left behind and is no file"
            assert stat.S_IMODE(mode) == 0o600, f"{path} is {oct(stat.S_IMODE(mode))}"
            assert SECRET.encode() not in Path(path).read_bytes(), f"{path} holds the secret"
            found.append(name)
    assert "meta.json" in found and "result.json" in found and "rank0.stdout.log" in found
    meta = json.loads((run.record.path / "meta.json").read_text())
    assert meta["env"]["TORCH_HUB_TOKEN"] == REDACTED and meta["env"]["NCCL_IB_KEY"] == REDACTED
    assert cli_main(["runs", "show", run.record.run_id, "--json"]) == 0
    assert SECRET not in capsys.readouterr().out
