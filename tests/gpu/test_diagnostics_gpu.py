"""Diagnostics on 2 real GPUs: the same NVML code the unit tests fake, the doctor, the NCCL
all-reduce bench and the rendezvous probe, for real.

    source tests/gpu/device_setup.sh && python3 -m pytest -m gpu tests/gpu/test_diagnostics_gpu.py -s
"""
from __future__ import annotations

import json
import subprocess
import sys
import time

from mgtutor.diagnostics.doctor.report import collect
from mgtutor.diagnostics.meters import Sampler
from mgtutor.diagnostics.schema import errors, load_schema
from mgtutor.diagnostics.doctor.topology import read_topology

def mgtutor_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "mgtutor.tui", *args]


HOLDER = """
import sys, time, torch
x = [torch.ones(64 << 20, device=f"cuda:{i}") for i in range(2)]
torch.cuda.synchronize()
print("ready", flush=True)
time.sleep(60)
"""


def test_sampler_sees_both_gpus_and_the_process_on_them(two_gpus):
    holder = subprocess.Popen([sys.executable, "-c", HOLDER], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "ready"
        time.sleep(1.0)
        sampler = Sampler(min_interval=0.5)
        gpus, host = sampler.sample(pids=[holder.pid])
        time.sleep(0.6)
        gpus, host = sampler.sample(pids=[holder.pid])
        print("\n", [(g.index, g.name, g.utilization_pct, g.memory_used_mib, g.power_w, g.temperature_c,
                      g.sm_clock_mhz, g.pcie_tx_kbps, g.nvlink_links_up, g.nvlink_tx_kbps, g.processes)
                     for g in gpus.gpus])
        assert gpus.error is None and len(gpus.gpus) >= 2
        for g in gpus.gpus[:2]:
            assert g.memory_total_mib > 100_000 and g.memory_used_mib > 256
            assert g.power_w is not None and g.power_limit_w is not None and g.temperature_c is not None
            assert g.nvlink_links_up and g.nvlink_links_up >= 1
            assert holder.pid in [p.pid for p in g.processes], g.processes
        assert holder.pid in host.processes and host.processes[holder.pid].rss_mib > 0
    finally:
        holder.kill()
        holder.wait()


def test_topology_and_doctor_see_nvlink(two_gpus):
    topo = read_topology()
    print("\n" + topo.matrix())
    pair = topo.pair(0, 1)
    assert pair.kind == "nvlink" and pair.label.startswith("NV") and pair.nvlink_links >= 1
    report = collect()
    assert errors(report, load_schema("doctor")) == []
    failed = [c for c in report["checks"] if c["status"] == "fail"]
    assert failed == [], failed
    assert report["versions"]["nccl"] and report["versions"]["driver"] and len(report["gpus"]) >= 2
    assert any(c["id"] == "link_0_1" and "NVLink" in c["message"] for c in report["checks"])


def bench(*args: str) -> dict:
    done = subprocess.run(mgtutor_argv("bench", "allreduce", "--nproc", "2", "--json", *args),
                          capture_output=True, text=True, timeout=500)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def test_nccl_bench_validates_and_relates_busbw_to_nvlink(two_gpus):
    report = bench("-b", "8", "-e", "256M", "-f", "32", "--check")
    print("\n" + json.dumps({k: v for k, v in report.items() if k != "rows"}, indent=1))
    for row in report["rows"]:
        print(row)
    assert errors(report, load_schema("allreduce")) == []
    assert report["backend"] == "nccl" and report["world_size"] == 2
    assert all(r["wrong"] == 0 for r in report["rows"])
    assert report["link"].startswith("NVLink") and "NVLink" in report["verdict"]


def test_bench_uses_cuda_graphs_and_direct_out_of_place(two_gpus):
    report = bench("-b", "8", "-e", "1M", "-f", "1024", "--check")
    assert report["graph"] is True, "CUDA graph capture failed: timings fell back to an eager loop"
    assert report["oop_method"] == "nccl", "out-of-place fell back to copy + all_reduce"
    assert all(r["wrong"] == 0 for r in report["rows"])


def test_rendezvous_probe_on_nccl(two_gpus):
    done = subprocess.run(mgtutor_argv("doctor", "--rendezvous", "--json", "--timeout", "60"),
                          capture_output=True, text=True, timeout=300)
    rep = json.loads(done.stdout)
    print("\n", rep["message"], [(r["rank"], r["joined_s"], r["init_s"], r["barrier_s"]) for r in rep["ranks"]])
    assert done.returncode == 0 and rep["ok"] and rep["backend"] == "nccl" and rep["world_size"] == 2
