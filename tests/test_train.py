"""The DDP trainer for real: 2 gloo ranks of the tiny CNN through the launcher.

One uninterrupted run (`full_run`, 12 steps, its checkpoint written at the end) is shared by the loss, replica,
sampler and resume checks; they carry the xdist group `train_full_run`, so one worker makes it once (without the
group each worker that got one of them made it again). Resume needs one more run, from full_run's checkpoint to
step 16, and the 16 uninterrupted steps it must match: the 2-rank point of the `mgtutor bench scaling` run
test_train_cli.py checks (tests/trainer_runs.py: `scaling_run`, the same group). Gradient accumulation and
--inject no-sampler are checked on one run of `mgtutor train` in test_train_cli.py. Small on purpose: 2 cores
run all of CI.

full_run and the resumed run start their ranks through the stand-in torchrun (what they check is the ranks'
training, DDP and the checkpoint); the scaling run's points are the trainer under the real torchrun, and the
resume test holds its first 12 steps equal to full_run's.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from mgtutor.training.runs.events.writer import read_events
from mgtutor.training.runs.launch.launcher import LAUNCHER_ENV, LaunchSpec, launch
from mgtutor.training.runs.records.record import RunRecord
from tests.conftest import STANDIN_LAUNCHER
from tests.trainer_runs import RESUMED_STEPS, SCALING_GROUP, TRAIN_ARGS, ScalingRun, point_record
from tests.trainer_runs import scaling_run  # noqa: F401 - a fixture: the shared run

pytestmark = pytest.mark.integration  # starts processes
FULL_RUN = SCALING_GROUP  # the tests that read full_run (and the scaling run): one worker makes it


def train(*args: str, nproc: int = 2) -> RunRecord:
    run = launch(LaunchSpec(target=["-m", "mgtutor.training.worker.train", *TRAIN_ARGS, *args], nproc=nproc,
                            backend="gloo", label="test-train"))
    run.wait(timeout=240)
    return run.record


def events(record: RunRecord, kind: str, rank: int | None = None) -> list[dict]:
    """The events of one type as they are on disk."""
    return [e.to_json() for e in read_events(record.events_path) if e.type == kind and (rank is None or e.rank == rank)]


def losses(record: RunRecord, rank: int = 0) -> dict[int, float]:
    return {e["step"]: e["loss"] for e in events(record, "step", rank)}


def indices(record: RunRecord, rank: int) -> list[int]:
    return json.loads((record.path / f"indices.rank{rank}.json").read_text())


def logs(record: RunRecord) -> str:
    return "\n".join(p.read_text() for _r, _s, p in record.rank_logs())


@pytest.fixture(scope="module")
def full_run(tmp_path_factory: pytest.TempPathFactory) -> RunRecord:
    """12 uninterrupted steps on 2 ranks, checkpointed at the end (module-wide XDG home and checkpoint folder, so
    they outlive one test's)."""
    mp = pytest.MonkeyPatch()
    mp.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("state")))
    mp.setenv(LAUNCHER_ENV, STANDIN_LAUNCHER)  # what standin_torchrun sets
    try:
        return train("--steps", "12", "--record-indices", "--checkpoint-dir", str(tmp_path_factory.mktemp("ckpt")))
    finally:
        mp.undo()


@FULL_RUN
def test_two_ranks_finish_and_lower_the_loss(full_run: RunRecord) -> None:
    assert full_run.result().status == "finished", logs(full_run)
    curve = losses(full_run)
    assert sorted(curve) == list(range(1, 13))
    first, last = sum(curve[s] for s in (1, 2, 3)) / 3, sum(curve[s] for s in (10, 11, 12)) / 3
    assert last < first * 0.8, curve
    results = events(full_run, "result")
    assert sorted(r["rank"] for r in results) == [0, 1]
    assert all(r["samples_per_s"] > 0 and r["final_loss"] == pytest.approx(curve[12]) for r in results if r["rank"] == 0)
    assert {e.type for e in read_events(full_run.events_path)} >= {"start", "rendezvous", "step", "result"}
    # --cuda-graphs auto stays off on CPU ranks, and the run says so at its start
    assert all(s["cuda_graphs"] is False and "CPU" in s["cuda_graphs_why"] for s in events(full_run, "start"))
    assert "cuda graphs: off (auto: the ranks run on the CPU" in full_run.rank_log(0, "stdout").read_text()
    # so does --compile auto, and nothing was compiled
    assert "compile: off (auto: the ranks run on the CPU)" in full_run.rank_log(0, "stdout").read_text()
    assert all(r["compile"] == "off" and "compile_s" not in r for r in results)


@FULL_RUN
def test_replicas_are_bit_identical_after_training(full_run: RunRecord) -> None:
    digests = {r["rank"]: r["params_sha256"] for r in events(full_run, "result")}
    assert digests[0] == digests[1]
    # the ranks trained on different samples, so identical weights are DDP's doing, not chance
    assert losses(full_run, 0) != losses(full_run, 1)


@FULL_RUN
def test_distributed_sampler_gives_disjoint_indices(full_run: RunRecord) -> None:
    seen0, seen1 = indices(full_run, 0), indices(full_run, 1)
    assert len(seen0) == len(seen1) == 12 * 16
    assert not set(seen0) & set(seen1)


@FULL_RUN
def test_resume_continues_the_same_loss_curve(full_run: RunRecord, scaling_run: ScalingRun, standin_torchrun) -> None:
    saved = events(full_run, "checkpoint")
    assert [e["step"] for e in saved] == [12]
    resumed_run = train("--steps", str(RESUMED_STEPS), "--checkpoint-dir", str(Path(saved[0]["path"]).parent),
                        "--resume")
    assert resumed_run.result().status == "finished", logs(resumed_run)
    assert [e["step"] for e in events(resumed_run, "checkpoint") if e.get("action") == "resumed"] == [12, 12]
    uninterrupted = RunRecord(point_record(scaling_run, 2))  # the same trainer arguments, never stopped
    assert uninterrupted.result().status == "finished", logs(uninterrupted)
    resumed, uninterrupted = losses(resumed_run), losses(uninterrupted)
    assert sorted(resumed) == list(range(13, RESUMED_STEPS + 1))
    assert {step: uninterrupted[step] for step in range(1, 13)} == pytest.approx(losses(full_run), rel=1e-5, abs=1e-6)
    for step in range(13, RESUMED_STEPS + 1):
        assert resumed[step] == pytest.approx(uninterrupted[step], rel=1e-5, abs=1e-6), (step, resumed, uninterrupted)
