"""Hang forensics on 2 GPUs over NCCL: rank 1 skips an all_reduce (600 s collective timeout, so only
mgtutor's own stall detection can answer in time). Within 30 s of rank 1 skipping, `mgtutor run`
must print a report that names rank 1, rank 0's all_reduce line and rank 1's line, and the Flight
Recorder's sequence numbers (asked for through each rank's dump pipe). Run on the GPU machine:
`pytest -m gpu tests/gpu/test_hang_gpu.py -s` (the numbers printed go to docs/benchmarks.md).
"""
from __future__ import annotations

import pytest

from test_hang_cli import REPORT_BY_S, diagnose_json, report_block
from mgtutor.training.runs.nvml import inventory
from mgtutor.training.runs.launch.procs import run_processes
from tests.gpu.gpu_helpers import hung_nccl_demo

pytestmark = pytest.mark.gpu


@pytest.fixture
def gpus2() -> None:
    if len(inventory().gpus) < 2:
        pytest.skip("needs 2 NVIDIA GPUs")


@pytest.mark.timeout(REPORT_BY_S + 180)
def test_skipped_all_reduce_on_nccl_names_rank_1_with_flight_recorder_seq(gpus2) -> None:
    cli, err, waited = hung_nccl_demo(2, "skip-allreduce", after="skipping the next all-reduce", settle_s=2.0)
    print(f"nccl skip-allreduce: hang report {waited:.1f} s after rank 1 skipped\n{err[-4000:]}")
    block = report_block(err)
    assert block.startswith(("hang report (rank_outside_collective)", "hang report (collective_mismatch)"))
    assert "rank 1" in block.split("\n", 1)[0]
    assert block.count("demo_workers.py:") >= 2  # rank 0's all_reduce line and rank 1's own line
    assert "flight recorder: rank 0: last entered #2 all_reduce" in block
    assert "first divergence at collective #2" in block and "rank 1 never reached it" in block
    assert waited < REPORT_BY_S, f"report after {waited:.1f} s"
    record = cli.record()
    assert not run_processes(record.name)
    assert list((record / "fr").glob("rank_*")), "no Flight Recorder dump in the run dir"
    finding = diagnose_json(record)["findings"][0]
    assert finding["kind"] in ("rank_outside_collective", "collective_mismatch") and 1 in finding["ranks"]
    assert any("#2" in line for line in finding["flight_recorder"])


@pytest.mark.timeout(REPORT_BY_S + 180)
def test_world_size_override_on_nccl_is_named_at_the_first_collective(gpus2) -> None:
    """On NCCL init_process_group returns at once; the ranks wait in their first all_reduce, where NCCL
    sets up its communicator. py-spy's native frames show that wait, and the report names it."""
    cli, err, waited = hung_nccl_demo(2, "world-size")
    print(f"nccl world-size, 2 ranks: hang report {waited:.1f} s after start\n{err[-3000:]}")
    assert report_block(err).startswith("hang report (world_size_mismatch): 2 ranks started, they wait for more "
                                        "than 2 in all_reduce, where NCCL sets up its communicator")
    assert waited < REPORT_BY_S and not run_processes(cli.record().name)
