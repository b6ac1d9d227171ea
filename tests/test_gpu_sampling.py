"""GPU and host sampling: NVML faked at its boundary (diagnostics.nvml's module), psutil real."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from fake_nvml import FakeGpu, FakePynvml, install, two_h200

from mgtutor.diagnostics import meters as gpu
from mgtutor.diagnostics.meters import GpuProcess, Sampler, sample_gpus, sample_host


def test_snapshot_reads_every_meter(monkeypatch):
    install(monkeypatch, two_h200())
    sample = sample_gpus()
    assert sample.error is None
    assert [g.index for g in sample.gpus] == [0, 1]
    first = sample.gpus[0]
    assert first.name == "NVIDIA H200" and first.uuid == "GPU-aaaa"
    assert first.utilization_pct == 37
    assert first.memory_used_mib == 1024 and first.memory_total_mib == 143771
    assert first.power_w == 123.5 and first.power_limit_w == 700.0
    assert first.temperature_c == 41 and first.sm_clock_mhz == 1980
    assert (first.pcie_tx_kbps, first.pcie_rx_kbps) == (1500, 2500)
    assert first.nvlink_links_up == 18
    assert first.processes == [GpuProcess(pid=4242, used_memory_mib=2048)]
    assert sample.gpus[1].processes == []


def test_unsupported_meters_are_none_not_errors(monkeypatch):
    old = FakeGpu(name="Tesla K80", nvlinks=[], processes=[(7, None)],
                  unsupported={"power", "power_limit", "pcie", "nvlink", "clock", "fields"})
    install(monkeypatch, FakePynvml([old]))
    snap = sample_gpus().gpus[0]
    assert snap.power_w is None and snap.power_limit_w is None
    assert snap.pcie_tx_kbps is None and snap.sm_clock_mhz is None
    assert snap.nvlink_links_up is None
    assert snap.utilization_pct == 37  # what is supported still comes through
    assert snap.processes == [GpuProcess(pid=7, used_memory_mib=None)]


def test_nvlink_down_links_are_counted_out(monkeypatch):
    install(monkeypatch, FakePynvml([FakeGpu(nvlinks=[1, 1, 0, 1])]))
    assert sample_gpus().gpus[0].nvlink_links_up == 3


def test_without_nvml_the_sample_says_why(monkeypatch):
    install(monkeypatch, None, error="no NVIDIA driver: libnvidia-ml.so was not found")
    sample = sample_gpus()
    assert sample.gpus == []
    assert "no NVIDIA driver" in sample.error


def test_the_real_library_disabled_by_env_says_why(monkeypatch):
    monkeypatch.setattr(gpu.nvml, "_state", {"initialised": False, "error": None, "pynvml": None})
    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")
    assert "MGTUTOR_NO_NVML" in sample_gpus().error


def test_sampler_sweeps_nvml_at_most_once_per_interval(monkeypatch):
    fake = two_h200()
    install(monkeypatch, fake)
    sampler = Sampler(min_interval=3600)
    first, _ = sampler.sample()
    fake.gpus[0].util = 99
    second, _ = sampler.sample()
    assert second is first and sampler.sweeps == 1
    calls = len(fake.calls)
    sampler.sample()
    assert len(fake.calls) == calls  # cached: NVML not touched
    sampler._last_mono -= 7200  # as if the interval had passed
    third, _ = sampler.sample()
    assert sampler.sweeps == 2 and third.gpus[0].utilization_pct == 99


def test_sampler_turns_nvlink_counters_into_throughput(monkeypatch):
    fake = FakePynvml([FakeGpu(nvlinks=[1, 1])])
    install(monkeypatch, fake)
    sampler = Sampler(min_interval=0, pcie_every=2)  # counters are read on every 2nd sweep
    first, _ = sampler.sample()
    assert first.gpus[0].nvlink_tx_kbps is None  # one sweep: no rate yet
    fake.gpus[0].nvlink_kib = 1000
    time.sleep(0.05)
    second, _ = sampler.sample()
    assert second.gpus[0].nvlink_tx_kbps is None  # not a counter sweep
    third, _ = sampler.sample()
    assert third.gpus[0].nvlink_tx_kbps > 0 and third.gpus[0].nvlink_rx_kbps > 0
    fourth, _ = sampler.sample()
    assert fourth.gpus[0].nvlink_tx_kbps == third.gpus[0].nvlink_tx_kbps  # the last rate is kept


@pytest.mark.integration
def test_host_sample_sees_a_busy_child_process():
    child = subprocess.Popen([sys.executable, "-c", "import time\nend=time.time()+3\nwhile time.time()<end: pass"])
    try:
        sample_host([child.pid])  # starts psutil's CPU counter for the child
        time.sleep(0.5)
        host = sample_host([child.pid, os.getpid(), 2 ** 22 + 12345])
        assert child.pid in host.processes and os.getpid() in host.processes
        assert 2 ** 22 + 12345 not in host.processes  # no such process: left out, no error
        assert host.processes[child.pid].cpu_percent > 0
        assert host.processes[child.pid].rss_mib > 1
        assert len(host.cpu_percent_per_core) == os.cpu_count()
        assert 0 < host.ram_used_mib < host.ram_total_mib
    finally:
        child.kill()
        child.wait()
