"""`mgtutor fit` on real ranks (torchrun, gloo, CPU): a plain DDP script with argparse options and no mgtutor
import, its batch found from its options, every trial ended by the ranks' hook after K optimizer steps, an
OOM on one rank ending the trial on every rank (issue 43, item 3). CPU ranks have no device memory, so the
GPU is stood in for at the CUDA boundary: MGTUTOR_FAKE_CUDA_MEMORY gives each rank a capacity and a straight
memory line, and the hook raises torch.cuda.OutOfMemoryError above it (training/worker/batch/fit_trial.py)."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import mgtutor_argv, no_gpu_env
from mgtutor.training.runs.events.reader import read_events
from mgtutor.training.runs.events.types import ErrorEvent, StepEvent
from mgtutor.training.runs.launch.procs import run_processes
from mgtutor.training.runs.records.record import RunRecord, runs_root

pytestmark = pytest.mark.integration  # starts processes

SCRIPT = Path(__file__).parent / "data" / "fit_ddp.py"
MIB, GIB = 1 << 20, 1 << 30
# rank 1's GPU holds 1 GiB fixed + 100 samples of 10 MiB (and 5 MiB to spare); rank 0's holds twice as much
FAKE = {"fixed": GIB, "per_sample": 10 * MIB, "capacity": {"0": 2 * GIB, "1": GIB + 100 * 10 * MIB + 5 * MIB}}


def fit(*args: str, fake: dict | None = FAKE) -> subprocess.CompletedProcess[str]:
    env = no_gpu_env()
    if fake is not None:
        env["MGTUTOR_FAKE_CUDA_MEMORY"] = json.dumps(fake)
    return subprocess.run(mgtutor_argv("fit", *args), capture_output=True, text=True, timeout=900, env=env)


def test_fit_finds_the_batch_of_the_smaller_rank_and_an_oom_on_one_rank_ends_every_rank() -> None:
    done = fit("--nproc", "2", "--json", "--", str(SCRIPT), "--batch-size", "160")
    assert done.returncode == 0, done.stderr[-3000:]
    answer = json.loads(done.stdout)
    assert answer["batch_option"] == "--batch-size" and answer["accumulation_option"] == "--grad-accum"
    assert answer["largest_batch"] == 100 and answer["recommended_batch"] <= 100  # rank 1's edge, exactly
    trial_lines = [line for line in done.stderr.splitlines() if line.startswith("trial ")]
    assert len(trial_lines) == len(answer["trials"]) >= 3  # each trial said as it ended
    command = answer["command"]
    assert command["global_batch"] == command["user_global_batch"] == 320  # 160 × 1 × 2 ranks, kept
    assert command["argv"][:5] == ["mgtutor", "run", "--nproc", "2", "--"] and "--grad-accum" in command["argv"]
    for trial in answer["trials"]:
        record = RunRecord(runs_root() / trial["run_id"])
        events = read_events(record.events_path)
        exits = {r.rank: r.exit_code for r in record.ranks()}
        assert not run_processes(trial["run_id"]), trial  # every process of the trial is gone
        if trial["fits"]:
            stopped = [e for e in events if isinstance(e, StepEvent) and e.extra.get("stopped")]
            assert exits == {0: 0, 1: 0} and sorted(e.rank for e in stopped) == [0, 1]
            assert all(e.step == 3 and e.extra["batch"] == trial["batch"] for e in stopped)
        else:  # over rank 1's edge only: its OOM ended rank 0 too, which was waiting for it in DDP's all-reduce
            assert trial["oom_ranks"] == [1] and trial["error"] is None
            assert [e.rank for e in events if isinstance(e, ErrorEvent) and e.error == "cuda_oom"] == [1]
            assert exits[1] == 1 and exits[0] != 0


def test_a_script_that_fails_whatever_the_batch_ends_the_search_with_its_own_error(standin_torchrun) -> None:
    """The search's own ending, each trial's rank started by the stand-in torchrun (MGTUTOR_LAUNCHER reaches
    the fit process through its environment); the trials under the real torchrun: the test above."""
    done = fit("--nproc", "1", "--", str(SCRIPT), "--fail-at-start")
    assert done.returncode == 1
    assert "for a reason other than memory" in done.stderr and "cannot find its data set" in done.stderr
    assert [line.split()[4] for line in done.stdout.splitlines() if line.startswith("trial ")] == ["8", "1"]
