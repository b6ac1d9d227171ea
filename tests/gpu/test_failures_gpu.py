"""The classifier on real GPU failures over NCCL: a CUDA OOM on one of 2 GPUs, and an NCCL collective
timeout (rank 1 skips an all-reduce, 5 s timeout). Run on the GPU machine:
`pytest -m gpu tests/gpu/test_failures_gpu.py -s`."""
from __future__ import annotations

import json

import pytest

from mgtutor.diagnostics.failures.demos import run_demo
from mgtutor.training.runs.nvml import inventory

pytestmark = pytest.mark.gpu


@pytest.fixture
def gpus2() -> None:
    if len(inventory().gpus) < 2:
        pytest.skip("needs 2 NVIDIA GPUs")


def _show(outcome) -> None:
    print(outcome.run.record.path, json.dumps([f.to_dict() for f in outcome.findings], indent=1)[:6000])
    for _rank, _stream, path in outcome.run.record.rank_logs():
        print(f"--- {path.name}\n{path.read_text(errors='replace')[-2500:]}")


def test_real_cuda_oom_on_one_of_two_gpus(gpus2) -> None:
    outcome = run_demo("oom", nproc=2, backend="nccl")
    _show(outcome)
    assert outcome.backend == "nccl"
    first = outcome.findings[0]
    assert (first.kind, first.rank) == ("cuda_oom", 1)
    assert "GPU 1" in first.summary
    assert any("CUDA out of memory" in ev["text"] for ev in first.evidence)


def test_real_nccl_collective_timeout_names_the_skipping_rank(gpus2) -> None:
    outcome = run_demo("skip-allreduce", nproc=2, backend="nccl")
    _show(outcome)
    first = outcome.findings[0]
    assert first.kind == "collective_timeout"
    assert first.rank == 1  # rank 1 skipped the all-reduce; rank 0 is the one that timed out
    assert any("Watchdog caught collective operation timeout" in ev["text"] for ev in first.evidence)
    assert "ALLREDUCE" in first.summary
