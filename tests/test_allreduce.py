"""The all-reduce bench: sizes, nccl-tests formulas, verdicts (NVML faked), and a real 2-rank gloo run."""
from __future__ import annotations

import json
import subprocess

import pytest
import torch
from conftest import mgtutor_argv, no_gpu_env
from fake_nvml import FakeGpu, FakePynvml, install, two_h200
from hypothesis import given, strategies as st

from mgtutor.training.worker.probes.allreduce import make_row
from mgtutor.diagnostics.bench.allreduce_bench import format_pair, verdict
from mgtutor.training.worker.probes.allreduce_ops import count_wrong, fill
from mgtutor.diagnostics.schema import errors, load_schema
from mgtutor.diagnostics.bench.sizes import element_count, format_size, parse_size, sweep
from mgtutor.diagnostics.doctor.topology import read_topology


@pytest.mark.parametrize("text, value", [("8", 8), ("1K", 1024), ("256M", 256 << 20), ("4G", 4 << 30),
                                         ("1.5k", 1536), ("2GB", 2 << 30), (64, 64)])
def test_sizes_are_read_like_nccl_tests(text, value):
    assert parse_size(text) == value


@pytest.mark.parametrize("bad", ["", "8X", "-1", "0", "1KK"])
def test_bad_sizes_say_what_is_accepted(bad):
    with pytest.raises(ValueError, match="8, 1K, 256M, 4G|more than 0"):
        parse_size(bad)


@given(st.integers(min_value=0, max_value=40))
def test_format_and_parse_round_trip(power):
    assert parse_size(format_size(1 << power).rstrip("B")) == 1 << power


def test_sweep_and_counts():
    assert sweep(8, 64, 2) == [8, 16, 32, 64]
    assert sweep(1 << 20, 4 << 20, 4) == [1 << 20, 4 << 20]
    assert element_count(8, "float") == 2 and element_count(1, "float") == 1 and element_count(8, "int8") == 8


def test_bandwidth_formulas_are_nccl_tests():
    row = make_row(1 << 30, 1 << 28, "float", 3000.0, world=2, in_place=True, wrong=0, graph=True, method="allreduce")
    assert row["algbw_gbps"] == pytest.approx((1 << 30) / 3000e-6 / 1e9, abs=0.01)
    assert row["busbw_gbps"] == pytest.approx(row["algbw_gbps"] * 2 * 1 / 2, abs=0.01)
    eight = make_row(1 << 30, 1 << 28, "float", 3000.0, world=8, in_place=True, wrong=0, graph=True, method="allreduce")
    assert eight["busbw_gbps"] == pytest.approx(eight["algbw_gbps"] * 2 * 7 / 8, abs=0.01)
    line = format_pair([row, row])
    assert line.split()[:3] == [str(1 << 30), str(1 << 28), "float"] and line.split()[-1] == "0"


def test_check_counts_exactly_the_wrong_elements():
    world, count = 3, 1000
    result = torch.zeros(count)
    for rank in range(world):  # what an all-reduce of `fill` data must give
        part = torch.empty(count)
        fill(torch, part, count, rank)
        result += part
    assert int(count_wrong(torch, result, count, world)) == 0
    result[[5, 500, 999]] += 1
    assert int(count_wrong(torch, result, count, world)) == 3


def rows_at(busbw: float, size: int = 2 << 30) -> list[dict]:
    return [{"bytes": size, "busbw_gbps": busbw, "wrong": 0}]


def test_verdict_relates_busbw_to_the_nvlink(monkeypatch):
    install(monkeypatch, two_h200())
    topo = read_topology()
    text, link = verdict("nccl", 2, rows_at(338.0), topo)
    assert link.startswith("NVLink 4 ×18") and "in line" in text and "338.0 GB/s" in text
    text, _ = verdict("nccl", 2, rows_at(40.0), topo)
    assert "far below" in text and "NCCL_DEBUG=INFO" in text
    text, _ = verdict("nccl", 2, rows_at(300.0, size=1 << 20), topo)
    assert "too small" in text


def test_verdict_on_pcie_without_p2p(monkeypatch):
    fake = FakePynvml([FakeGpu(uuid="a", nvlinks=[]), FakeGpu(uuid="b", nvlinks=[])], nvlink_p2p=5)
    fake.nvmlDeviceGetP2PStatus = lambda a, b, index: 5
    install(monkeypatch, fake)
    text, link = verdict("nccl", 2, rows_at(50.0), read_topology())
    assert link.startswith("PCIe only gen5 ×16") and "P2P disabled" in link and "in line" in text


def test_verdict_flags_wrong_results_and_cpu_runs():
    text, link = verdict("gloo", 2, [{"bytes": 8, "busbw_gbps": 0.1, "wrong": 4}], None)
    assert text.startswith("VALIDATION FAILED: 4") and "gloo on CPU" in text and link == "CPU (gloo)"


@pytest.mark.integration
def test_gloo_bench_runs_two_ranks_and_validates_sums():
    done = subprocess.run(mgtutor_argv("bench", "allreduce", "--nproc", "2", "--backend", "gloo", "-b", "8",
                                       "-e", "64K", "-f", "32", "--iters", "3", "--warmup", "1", "--check", "--json"),
                          capture_output=True, text=True, env=no_gpu_env(), timeout=240)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert errors(report, load_schema("allreduce")) == []
    assert report["backend"] == "gloo" and report["world_size"] == 2
    assert [r["bytes"] for r in report["rows"]] == [8, 8, 256, 256, 8192, 8192]
    assert [r["in_place"] for r in report["rows"]] == [False, True] * 3
    assert all(r["wrong"] == 0 and r["time_us"] > 0 for r in report["rows"])
    assert "gloo on CPU" in report["verdict"]


@pytest.mark.integration
def test_bench_bad_input_is_one_line():
    done = subprocess.run(mgtutor_argv("bench", "allreduce", "-e", "12Q"), capture_output=True, text=True,
                          env=no_gpu_env(), timeout=60)
    assert done.returncode == 2 and "8, 1K, 256M, 4G" in done.stderr and "Traceback" not in done.stderr
