"""The batch finder: its arithmetic, and real gloo ranks that agree on one batch while one of them runs
out of memory. The GPU's memory is the only fake (MGTUTOR_FAKE_CUDA_MEMORY at the CUDA boundary):
each rank really trains the tiny CNN at every trial batch on its CPU."""
from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
import torch
from conftest import mgtutor_argv, no_gpu_env

from mgtutor.training.runs.events.writer import read_events
from mgtutor.training.runs.events.types import BatchResultEvent, BatchTrialEvent
from mgtutor.training.runs.batchfit import Bisect, Confirm, Line, chosen_batch, fit_line, split_global

MIB = 1 << 20


def test_the_memory_line_comes_from_two_or_three_trials() -> None:
    line = fit_line([(8, 100 * MIB + 8 * 3 * MIB), (32, 100 * MIB + 32 * 3 * MIB), (128, 100 * MIB + 128 * 3 * MIB)])
    assert round(line.fixed_bytes) == 100 * MIB and round(line.per_sample_bytes) == 3 * MIB
    assert line.batch_for(100 * MIB + 3000 * 3 * MIB) == 3000
    with pytest.raises(ValueError):
        fit_line([(8, 1), (8, 2)])


def walk(search: Confirm | Bisect, true_max: int) -> tuple[int, int]:
    trials = 0
    while (batch := search.next_batch()) is not None:
        search.record(batch, batch <= true_max)
        trials += 1
    return search.best_fit, trials


@pytest.mark.parametrize("predicted,true_max", [(3300, 3296), (3100, 3296), (3600, 3296), (1000, 3296), (9000, 3296)])
def test_confirm_ends_within_one_percent_of_the_edge_from_any_prediction(predicted: int, true_max: int) -> None:
    found, trials = walk(Confirm(predicted), true_max)
    assert true_max * 0.99 <= found <= true_max
    near, near_trials = walk(Confirm(3300), true_max)
    assert near_trials <= trials  # a good prediction costs no more than a bad one
    assert near_trials <= 6


def test_confirm_never_passes_the_cap_and_bisect_finds_the_exact_edge() -> None:
    assert walk(Confirm(5000, cap=2000), 3296)[0] == 2000
    assert walk(Bisect(8, 16384), 3296)[0] == 3296


def test_the_margin_leaves_memory_free_and_rounds_to_eight() -> None:
    line = Line(fixed_bytes=2 * 2**30, per_sample_bytes=40 * MIB)
    budget = 140 * 2**30
    chosen = chosen_batch(3296, line, budget, 0.05)
    assert chosen % 8 == 0 and chosen < 3296
    assert line.fixed_bytes + chosen * line.per_sample_bytes <= 0.95 * (line.fixed_bytes + 3296 * line.per_sample_bytes)
    assert chosen_batch(5, line, budget, 0.0) == 5


@pytest.mark.parametrize("target,world,cap,expect", [
    (8192, 2, 3130, (2048, 2)), (8192, 1, 8192, (8192, 1)), (1000, 3, 200, (166, 2)), (96, 4, 1000, (24, 1))])
def test_a_global_batch_splits_into_per_rank_batch_times_accumulation(target, world, cap, expect) -> None:
    split = split_global(target, world, cap)
    assert (split.per_rank, split.accumulation) == expect and split.per_rank <= cap
    assert split.global_batch == target or split.global_batch < target


FAKE = {"fixed": 100_000_000, "per_sample": 1_000_000, "capacity": {"0": 1_100_000_000, "1": 700_000_000}}


@pytest.mark.integration
def test_two_ranks_agree_on_the_batch_that_fits_the_smaller_one_and_an_oom_hangs_no_one() -> None:
    """Rank 1 can hold 600 samples, rank 0 1000: trials above 600 run out of memory on rank 1 only;
    both ranks go on to the next trial, agree on 600, and prove the chosen batch."""
    env = dict(no_gpu_env(), MGTUTOR_FAKE_CUDA_MEMORY=json.dumps(FAKE))
    proc = subprocess.run(mgtutor_argv("bench", "maxbatch", "--model", "tinycnn", "--image-size", "8", "--nproc", "2",
                                       "--prove-steps", "2", "--global-batch", "2000", "--json"),
                          capture_output=True, text=True, timeout=240, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = json.loads(proc.stdout)
    assert out["measured_max"] == 600 and out["predicted"] == 600
    assert out["chosen_batch"] == 560  # 600 less 5 % of rank 1's 700 MB (35 samples), down to a multiple of 8
    assert out["per_sample_bytes"] == pytest.approx(1_000_000, rel=0.01)
    assert out["fixed_bytes"] == pytest.approx(100_000_000, rel=0.01)
    assert out["budgets_bytes"] == [1_100_000_000, 700_000_000] and out["proved"] is True
    failed = [t for t in out["trials"] if not t["fits"]]
    assert failed and all(t["batch"] > 600 for t in failed)
    assert out["split"] == {"per_rank": 500, "accumulation": 2, "world_size": 2, "global_batch": 2000}
    # every trial was printed as it ended, naming the rank that ran out
    printed = [line for line in proc.stderr.splitlines() if "batch finder: trial" in line]
    assert len(printed) == len(out["trials"]) and any("out of memory on rank 1" in line for line in printed)
    # both ranks exited 0: the OOM killed no one
    result = json.loads((Path(os.environ["XDG_STATE_HOME"]) / "mgtutor" / "runs" / out["run_id"] / "result.json").read_text())
    assert [r["exit_code"] for r in result["ranks"]] == [0, 0]


@pytest.mark.integration
def test_train_batch_size_auto_searches_then_trains_at_the_answer() -> None:
    """Both ranks hold 300 samples. An epoch of 608 samples caps a rank's batch at 304, so the walk above the
    prediction (300, which fits) ends in one trial, at the cap (304), that runs out of memory on both ranks."""
    fake = {"fixed": 100_000_000, "per_sample": 1_000_000, "capacity": {"*": 400_000_000}}
    env = dict(no_gpu_env(), MGTUTOR_FAKE_CUDA_MEMORY=json.dumps(fake))
    proc = subprocess.run(mgtutor_argv("train", "--backend", "gloo", "--nproc", "2", "--batch-size", "auto",
                                       "--image-size", "8", "--dataset-size", "608", "--steps", "2", "--log-every", "1"),
                          capture_output=True, text=True, timeout=240, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "[rank 0] batch finder: measured maximum 300" in proc.stdout
    trials = {int(found[1]): found[2] for found in re.finditer(r"batch finder: trial .* batch +(\d+)  (.*)", proc.stdout)}
    assert trials[304].startswith("out of memory on ranks 0, 1") and max(trials) <= 304, trials  # never past the epoch
    assert "chosen batch 280 per rank" in proc.stdout
    record = proc.stdout.strip().splitlines()[-1].removeprefix("run record: ")
    events = read_events(f"{record}/events.jsonl")
    answer = next(e for e in events if isinstance(e, BatchResultEvent))
    assert answer.chosen_batch == 280 and any(isinstance(e, BatchTrialEvent) for e in events)
    result = next(e for e in events if e.type.value == "result" and e.extra.get("samples_per_step"))
    assert result.extra["samples_per_step"] == 280


def test_bench_maxbatch_without_a_gpu_or_with_bad_input_says_so_in_one_line(monkeypatch, capsys) -> None:
    from mgtutor.tui.cli import main

    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")
    assert main(["bench", "maxbatch"]) == 2
    assert "no NVIDIA GPU was found" in capsys.readouterr().err
    assert main(["bench", "maxbatch", "--margin", "80"]) == 2
    assert "--margin is a percentage" in capsys.readouterr().err


def test_a_prediction_a_little_high_walks_down_near_it_instead_of_bisecting_from_the_small_trials() -> None:
    found, trials = walk(Confirm(3460, floor_fit=825), 3296)
    assert 3296 * 0.99 <= found <= 3296 and trials <= 7


def test_train_batch_size_auto_on_cpu_ranks_is_refused_in_one_line(monkeypatch, capsys) -> None:
    from mgtutor.tui.cli import main

    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")
    monkeypatch.delenv("MGTUTOR_FAKE_CUDA_MEMORY", raising=False)
    assert main(["train", "--batch-size", "auto"]) == 2
    assert "--batch-size auto measures GPU memory" in capsys.readouterr().err
    with pytest.raises(SystemExit) as bad:  # argparse's own one-line error
        main(["train", "--batch-size", "lots"])
    assert bad.value.code == 2 and "invalid batch size: 'lots' (a number, or auto)" in capsys.readouterr().err


def test_the_monitor_form_passes_batch_size_auto_to_the_trainer() -> None:
    from mgtutor.tui.widgets.launch_form import FormValues, build_launch

    spec, command = build_launch(FormValues(batch_size="auto", backend="nccl", nproc="1"))
    assert spec.target[spec.target.index("--batch-size") + 1] == "auto" and "--batch-size auto" in command


def test_train_batch_size_auto_never_picks_more_than_an_epoch_holds(monkeypatch, capsys) -> None:
    """The trainer's --batch-size auto (choose_batch) for 2 ranks of a 400-sample epoch, in process: the cap it
    sets and the search under it, against the fake memory model. Both ranks hold the same, so one rank's search
    is the agreed one; the trial step only notes its batch. The same path on two real ranks, trials trained:
    test_train_batch_size_auto_searches_then_trains_at_the_answer."""
    from mgtutor.training.runs.events.writer import EventWriter
    from mgtutor.training.worker import train
    from mgtutor.training.worker.batch import batchfind, maxbatch

    fake = {"fixed": 100_000_000, "per_sample": 1_000_000, "capacity": {"*": 4_000_000_000}}
    monkeypatch.setenv(batchfind.FAKE_ENV, json.dumps(fake))
    monkeypatch.setattr(batchfind.TrialStep, "__init__", lambda self, args, device: None)
    monkeypatch.setattr(batchfind.TrialStep, "run", lambda self, batch, steps: 0.0)
    finders: list[int] = []

    def one_rank_of(args, rank, world_size, device, group, say):
        finders.append(world_size)
        return batchfind.BatchFinder(args, rank, 1, device, None, say)

    monkeypatch.setattr(maxbatch, "BatchFinder", one_rank_of)
    args = train.parse_args(["--batch-size", "auto", "--dataset-size", "400", "--steps", "1", "--log-every", "1"])
    chosen = maxbatch.choose_batch(args, 0, 2, torch.device("cpu"), EventWriter(None, 0))
    out = capsys.readouterr().out
    assert finders == [2] and args.max_batch == 200
    assert "measured maximum 200 " in out  # 400 samples on 2 ranks: one step of 200 each at most
    assert chosen <= 200


def test_a_cap_far_above_the_edge_is_no_failure_to_bisect_from() -> None:
    """An epoch of 50,000 samples caps the batch at 25,000; the edge is 300 and the prediction fits: the walk
    steps up from it, never halfway to the cap (that took 13 more trials, each a real run)."""
    found, trials = walk(Confirm(296, cap=25_000), 300)
    assert found == 300 and trials <= 4
    assert walk(Confirm(290, cap=295), 300) == (295, 2)  # fits up to the cap: the cap is the answer


def test_a_line_too_flat_to_predict_still_walks_up_to_the_edge() -> None:
    found, trials = walk(Confirm(33, floor_fit=32), 5000)
    assert 5000 * 0.99 <= found <= 5000 and trials <= 30


def test_an_aimed_prediction_is_tried_next_and_the_walk_goes_on_from_it() -> None:
    confirm = Confirm(2450, floor_fit=612)
    assert confirm.next_batch() == 2450
    confirm.record(2450, True)
    confirm.aim(4836)
    assert confirm.next_batch() == 4836
    confirm.record(4836, True)
    found, trials = walk(confirm, 4836)
    assert found == 4836 and trials <= 3
    capped = Confirm(100, cap=1000)
    capped.aim(5000)
    assert capped.next_batch() == 100 and capped.target == 1000  # never aims past the cap


def test_a_line_steeper_at_small_batches_is_refitted_near_the_edge(monkeypatch) -> None:
    """Real steps cost less per sample at large batches than at the small ones the line is first fit to:
    the fit far out corrects the slope, and the prediction from the last two fits is the edge itself.
    The search's arithmetic in process, against the same fake memory model the ranks use (what fits and
    each peak come from it alone): `bench maxbatch --model tinycnn --image-size 16 --nproc 1 --prove-steps 1`
    as one rank runs it, without training each trial batch; the real trials on real ranks run in
    test_two_ranks_agree_on_the_batch_that_fits_the_smaller_one_and_an_oom_hangs_no_one and the
    --batch-size auto tests."""
    from mgtutor.training.worker.batch import batchfind, maxbatch

    fake = {"fixed": 100_000_000, "per_sample": 2_000_000, "knee": {"batch": 64, "per_sample": 1_000_000},
            "capacity": {"*": 5_000_000_000}}
    monkeypatch.setenv(batchfind.FAKE_ENV, json.dumps(fake))
    # the trial step is the trainer's own (its model and optimizer built once, then trained at each batch):
    # here it only notes the batches it was given (building torch's SGD imports torch._dynamo, seconds)
    monkeypatch.setattr(batchfind.TrialStep, "__init__", lambda self, args, device: None)
    steps: list[tuple[int, int]] = []
    monkeypatch.setattr(batchfind.TrialStep, "run", lambda self, batch, steps_: steps.append((batch, steps_)) or 0.0)
    args = maxbatch.parse_args(["--model", "tinycnn", "--image-size", "16", "--prove-steps", "1"])
    said: list[str] = []
    finder = batchfind.BatchFinder(args, 0, 1, torch.device("cpu"), None, said.append)
    search = finder.find()
    out = maxbatch.result_fields(search, args, 1)
    edge = 64 + (5_000_000_000 - 228_000_000) // 1_000_000  # 4836
    assert out["measured_max"] == edge and out["predictions"][-1] == edge
    assert out["predictions"][0] == out["predicted"] < 0.97 * edge  # the first line (8–32 and 612 samples): too steep
    assert out["per_sample_bytes"] > 1_000_000  # reported: the first line's (the refits only aim)
    assert len(out["trials"]) <= 9
    assert any("memory line refitted at batch" in line for line in said)
    # every trial that fitted the fake ran the step at its batch; those over the edge never reached it
    assert [b for b, _n in steps] == [t["batch"] for t in out["trials"] if t["fits"]]


def test_ranks_sharing_a_gpu_each_keep_to_their_share(monkeypatch) -> None:
    """At the CUDA boundary only: two ranks on one GPU cap their allocators at half of it; a rank
    alone on its GPU is not capped."""
    from mgtutor.training.worker.batch.batchfind import CudaMemory

    capped: list[tuple[float, object]] = []
    monkeypatch.setattr(torch.cuda, "set_per_process_memory_fraction", lambda f, d: capped.append((f, d)))
    device = torch.device("cuda", 0)
    CudaMemory(device).share(1)
    assert capped == []
    CudaMemory(device).share(2)
    assert capped == [(0.5, device)]
