"""The trainer on 2 real GPUs over NCCL: training, the CUDA-graph step, a real CUDA OOM, a real
init timeout. Run on the GPU machine: `pytest -m gpu tests/gpu/test_train_gpu.py`."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from mgtutor.training.runs.events.writer import StepEvent, read_events
from mgtutor.training.runs.launch.launcher import LaunchSpec, launch
from mgtutor.training.runs.records.record import RunRecord, exit_code_for


def train(*args: str) -> RunRecord:
    run = launch(LaunchSpec(target=["-m", "mgtutor.training.worker.train", *args], nproc=2, backend="nccl",
                            label="gpu-train"))
    run.wait(timeout=540)
    return run.record


def of(record: RunRecord, kind: str) -> dict[int, dict]:
    return {e.rank: e.to_json() for e in read_events(record.events_path) if e.type == kind}


def logs(record: RunRecord) -> str:
    return "\n".join(p.read_text()[-3000:] for _r, _s, p in record.rank_logs())


def test_mgtutor_train_resnet18_on_two_gpus(two_gpus) -> None:
    proc = subprocess.run([sys.executable, "-m", "mgtutor.tui", "train", "--model", "resnet18", "--nproc", "2",
                           "--batch-size", "256", "--steps", "60", "--log-every", "20"],
                          capture_output=True, text=True, timeout=540)
    print(proc.stdout[-4000:], proc.stderr[-2000:])
    assert proc.returncode == 0
    record = RunRecord(proc.stdout.strip().splitlines()[-1].removeprefix("run record: "))
    assert record.meta().backend == "nccl"
    starts, results = of(record, "start"), of(record, "result")
    assert {starts[0]["device"], starts[1]["device"]} == {"cuda:0", "cuda:1"}
    # no flag: --cuda-graphs auto turns the graphed step on for this fixed-shape GPU run, and says so
    assert all(s["cuda_graphs"] is True and s["cuda_graphs_why"].startswith("on (auto") for s in starts.values())
    assert "cuda graphs: on (auto" in proc.stdout
    assert results[0]["params_sha256"] == results[1]["params_sha256"]
    assert all(r["samples_per_s"] > 0 and r["mem_peak_mib"] > 0 for r in results.values())
    assert of(record, "rendezvous")[1]["world_size"] == 2


@pytest.mark.parametrize("extra", [["--cuda-graphs"], ["--cuda-graphs", "off"], ["--compile", "default"]],
                         ids=["cuda-graphs", "eager", "compile"])
def test_fast_paths_train_correctly(two_gpus, extra: list[str]) -> None:
    # every step logged: the synthetic classes are learnt within ten steps, so the first loss must be seen
    record = train("--model", "resnet18", "--batch-size", "256", "--steps", "40", "--log-every", "1", *extra)
    assert record.result().status == "finished", logs(record)
    results = of(record, "result")
    assert results[0]["params_sha256"] == results[1]["params_sha256"]
    # --compile default keeps --cuda-graphs auto on: DDP's compiled step runs inside the whole-step graph
    assert of(record, "start")[0]["cuda_graphs"] is (extra != ["--cuda-graphs", "off"])
    if "--compile" in extra:
        assert results[0]["compile"] == "default inside the whole-step CUDA graph", logs(record)
        assert results[0].get("compile_fallback") is None, results[0]["compile_fallback"]
    losses = [e.loss for e in read_events(record.events_path) if isinstance(e, StepEvent) and e.rank == 0]
    assert losses[-1] < losses[0] / 10, losses


def test_inject_oom_is_a_real_cuda_oom(two_gpus) -> None:
    record = train("--model", "resnet18", "--steps", "10", "--inject", "oom")
    result = record.result()
    assert result["status"] == "failed" and exit_code_for(result) != 0
    assert result["first_failure"]["rank"] == 1, logs(record)
    error = of(record, "error")[1]
    assert error["exception"] == "OutOfMemoryError" and "CUDA out of memory" in error["error"]
    assert "torch.OutOfMemoryError: CUDA out of memory" in record.rank_log(1, "stderr").read_text()


def test_hang_before_init_times_out_on_nccl(two_gpus) -> None:
    record = train("--steps", "10", "--inject", "hang-before-init", "--init-timeout", "10")
    result = record.result()
    assert result["status"] == "failed" and result["first_failure"]["rank"] == 0, logs(record)
    assert "imeout" in of(record, "error")[0]["error"]


def test_seed_recipe_through_the_real_data_path(two_gpus, tmp_path: Path) -> None:
    repo = Path(__file__).resolve().parents[2]
    subprocess.run([sys.executable, str(repo / "tests/bench/make_fake_cifar.py"), str(tmp_path),
                    "--per-batch", "2000"], check=True)
    record = train("--model", "resnet18", "--data", "cifar10", "--data-dir", str(tmp_path), "--workers", "4",
                   "--batch-size", "128", "--amp", "off", "--channels-last", "off", "--steps", "30")
    assert record.result().status == "finished", logs(record)
    print(json.dumps(of(record, "result"), indent=1))
