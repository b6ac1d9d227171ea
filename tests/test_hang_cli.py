"""The three hangs of the issue, for real: `mgtutor run` on 2 gloo ranks with PyTorch's default
timeouts (30 minutes on gloo), lesson 14's hang.py. Each must print its hang report within 30 s
(the test's own timeout is the bound; nothing else is timed), keep running until Ctrl+C, leave no
process behind, and `mgtutor diagnose RUN` must give the same report afterwards. The slow-loader hang is
the run test_i18n_cli.py reads in Chinese (`zh_slow_loader_run`, tests/hang_runs.py); the other two print in English.
"""
from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from conftest import mgtutor_argv, no_gpu_env
from mgtutor.training.runs.launch.procs import run_processes
from tests.hang_runs import GROUP, HANG, Cli, diagnose_json, zh_slow_loader_run  # noqa: F401 (a fixture)

pytestmark = pytest.mark.integration

REPORT_BY_S = 30.0


def gloo_flight_recorder() -> bool:
    import torch._C._distributed_c10d as c10d

    return hasattr(c10d, "_dump_fr_trace")


def report_block(err: str) -> str:
    start = err.index("hang report (")
    return err[start:start + 3000]


def hang_case(mode: str, after: str | None, while_hung=None) -> tuple[str, Path, float]:
    cli = Cli("run", "--nproc", "2", "--backend", "gloo", "--", HANG, "--mode", mode)
    try:
        waited = cli.wait_for("hang report (", after=after)
        time.sleep(1.0)  # the rest of the report
        assert cli.proc.poll() is None, "the run must keep going after the report"
        if while_hung is not None:
            while_hung()
        err = cli.interrupt()
    finally:
        cli.kill()
    assert cli.proc.returncode == 130, err[-2000:]
    assert "no process left" in err
    record = cli.record()
    assert not run_processes(record.name)
    print(f"{mode}: hang report {waited:.1f} s after {'start' if after is None else repr(after)}")
    return err, record, waited


def runs_stacks_now() -> None:
    """`mgtutor runs stacks ID` on the hung run: a fresh capture, the same kind of report, the files."""
    listed = subprocess.run(mgtutor_argv("runs", "list", "--json"), capture_output=True, text=True, timeout=60,
                            env=no_gpu_env())
    run_id = json.loads(listed.stdout)[0]["id"]
    shown = subprocess.run(mgtutor_argv("runs", "stacks", run_id), capture_output=True, text=True, timeout=60,
                           env=no_gpu_env())
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith(f"stacks of run {run_id} (captured now in ")
    assert "hang report (world_size_mismatch)" in shown.stdout
    assert shown.stdout.count("/rank") >= 2 and "-on-demand" in shown.stdout
    as_json = subprocess.run(mgtutor_argv("runs", "stacks", run_id, "--json"), capture_output=True, text=True,
                             timeout=60, env=no_gpu_env())
    data = json.loads(as_json.stdout)
    assert data["live"] is True and data["kind"] == "world_size_mismatch" and data["where"]["1"]["line"] == 38


@pytest.mark.timeout(REPORT_BY_S + 180)
def test_world_size_override_is_named_within_30_s_of_start():
    err, record, waited = hang_case("world-size", after=None, while_hung=runs_stacks_now)
    block = report_block(err)
    assert block.startswith("hang report (world_size_mismatch): 2 ranks started, they wait for 3 in init_process_group")
    assert "hang.py:38 in setup" in block and "let torchrun set the world size" in block.lower()
    assert waited < REPORT_BY_S, f"report after {waited:.1f} s"
    finding = diagnose_json(record)["findings"][0]
    assert finding["kind"] == "world_size_mismatch" and finding["where"]["0"]["line"] == 38
    assert all(Path(p).is_file() for p in finding["stacks"].values())


@pytest.mark.timeout(REPORT_BY_S + 120)
def test_skipped_all_reduce_names_rank_1_and_both_lines():
    err, record, waited = hang_case("skip-allreduce", after="rank 1 step 4")
    block = report_block(err)
    assert block.startswith(("hang report (collective_mismatch)", "hang report (rank_outside_collective)"))
    assert "rank 0 waits in all_reduce at hang.py:48" in block and "rank 1 waits in barrier at hang.py:50" in block
    if gloo_flight_recorder():  # torch records gloo collectives too: the stack hook asked for a dump
        assert "first divergence at collective #5: rank 0 ran all_reduce [[256]]; rank 1 ran barrier" in block
    assert waited < REPORT_BY_S, f"report after {waited:.1f} s"
    finding = diagnose_json(record)["findings"][0]
    assert finding["kind"] == "collective_mismatch"
    assert (finding["where"]["0"]["line"], finding["where"]["1"]["line"]) == (48, 50)


@pytest.mark.timeout(REPORT_BY_S + 120)
@pytest.mark.xdist_group(GROUP)  # the run is test_i18n_cli.py's too (tests/hang_runs.py)
def test_rank_stuck_in_its_data_loader_is_named(zh_slow_loader_run):
    """On the slow-loader hang that `mgtutor --lang zh run` printed in Chinese (test_i18n_cli.py reads its lines):
    what every hang here must do, and the report in English as the saved capture says it (the English printed live:
    the two hangs above)."""
    from mgtutor.diagnostics.failures.hang.watch import latest_report
    from mgtutor.training.runs.records.record import RunRecord

    run = zh_slow_loader_run
    assert run.went_on, "the run must keep going after the report"
    assert run.returncode == 130, run.err[-2000:]
    assert "没有残留进程" in run.err and run.processes_left == []  # "no process left"
    print(f"slow-loader: hang report {run.waited:.1f} s after 'rank 0: joined'")
    assert run.waited < REPORT_BY_S, f"report after {run.waited:.1f} s"
    block = latest_report(RunRecord(run.record)).text()
    assert block.startswith("hang report (rank_outside_collective): Rank 1 is in its data loading"), block
    assert "worker" in block and "hang.py:30 in __getitem__" in block
    finding = run.diagnosed["findings"][0]
    assert finding["kind"] == "rank_outside_collective" and finding["ranks"] == [1]
    assert finding["where"]["1"]["worker"]["function"] == "__getitem__"


# Rank 1's data loader worker spends SECONDS s on its first sample; rank 0 waits for it in a real gloo all_reduce.
# Nothing moves between the watch's two looks: only what the worker does tells a slow sample from a stuck one.
QUIET_RANK_1 = """import os, time, torch, torch.distributed as dist
from torch.utils.data import DataLoader, Dataset
class Slow(Dataset):
    def __len__(self):
        return 8
    def __getitem__(self, i):
        if os.environ["RANK"] == "1" and i == 0:
            end = time.time() + SECONDS
            while time.time() < end:
                WAIT
        return torch.ones(4)
dist.init_process_group("gloo")
print("joined", flush=True)
for batch in DataLoader(Slow(), batch_size=8, num_workers=1):
    total = batch.sum()
    dist.all_reduce(total)
print("done", flush=True)
dist.destroy_process_group()
"""


@pytest.mark.timeout(240)
@pytest.mark.parametrize("wait,seconds,reported", [("pass", 8, False), ("time.sleep(0.05)", 20, True)],
                         ids=["computes", "sleeps"])
def test_a_quiet_run_that_computes_gets_no_hang_report(write_script, standin_torchrun, wait, seconds, reported):
    """8 s (asleep: 20 s) without a line while rank 1's data loader worker is on one sample: the hang watch looks
    after 2 s of quiet (`--hang-after 2`: the spinning worker's CPU is the test's cost) and 2 s later finds every
    rank where it was. A worker burning CPU all that time is slow, not stuck: no report; the same worker asleep is
    the hang the report names (the control: without it a watch that never looked would pass; 20 s, so that on a
    loaded machine the two looks and their stack captures end before it wakes). Nothing here is torchrun's (the
    stand-in starts the ranks); the watch on ranks torchrun started, at its default 5 s: the three hangs above."""
    script = write_script("busy.py", QUIET_RANK_1.replace("WAIT", wait).replace("SECONDS", str(seconds)))
    proc = subprocess.run(mgtutor_argv("run", "--nproc", "2", "--backend", "gloo", "--hang-after", "2", "--",
                                       str(script)), capture_output=True, text=True, timeout=200, env=no_gpu_env())
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "[rank 1] done" in proc.stdout
    assert ("hang report" in proc.stderr) == reported, proc.stderr[-2000:]
