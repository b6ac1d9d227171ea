"""A stand-in for the `pynvml` module, injected at the NVML boundary only (diagnostics.nvml's loaded
module). It answers like NVML does on the 2× H200 machine, and can be told that a GPU does not
support a call (it then raises NVMLError_NotSupported, as the real library would)."""
from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest

from mgtutor.diagnostics import meters as gpu

from mgtutor.training.runs import nvml


class NVMLError(Exception):
    pass


class NVMLError_NotSupported(NVMLError):
    pass


class NVMLError_InvalidArgument(NVMLError):
    pass


class NVMLError_LibraryNotFound(NVMLError):
    pass


@dataclass
class FakeGpu:
    name: str = "NVIDIA H200"
    uuid: str = "GPU-0000"
    bus_id: str = "00000000:18:00.0"
    memory_total: int = 143771 << 20
    memory_used: int = 1024 << 20
    util: int = 37
    power_mw: int = 123456
    power_limit_mw: int = 700000
    temperature: int = 41
    sm_clock: int = 1980
    pcie_tx: int = 1500
    pcie_rx: int = 2500
    pcie_gen: int = 5
    pcie_width: int = 16
    capability: tuple[int, int] = (9, 0)
    nvlinks: list[int] = field(default_factory=lambda: [1] * 18)
    nvlink_kib: int = 0  # cumulative data counter per link (tx and rx)
    processes: list[tuple[int, int | None]] = field(default_factory=list)
    unsupported: set[str] = field(default_factory=set)


class FakePynvml:
    """Module-like object with the pynvml functions mgtutor calls."""
    NVMLError = NVMLError
    NVMLError_NotSupported = NVMLError_NotSupported
    NVMLError_LibraryNotFound = NVMLError_LibraryNotFound
    NVML_TEMPERATURE_GPU = 0
    NVML_CLOCK_SM = 1
    NVML_PCIE_UTIL_TX_BYTES = 0
    NVML_PCIE_UTIL_RX_BYTES = 1
    NVML_NVLINK_MAX_LINKS = 36
    NVML_P2P_CAPS_INDEX_READ = (0,)  # the real module has this trailing-comma bug
    NVML_P2P_CAPS_INDEX_NVLINK = 2
    NVML_P2P_STATUS_OK = 0
    NVML_P2P_STATUS_NOT_SUPPORTED = 5
    NVML_FEATURE_ENABLED = 1

    def __init__(self, gpus: list[FakeGpu], driver: str = "580.95.05", cuda_driver: int = 13000,
                 common_ancestor: int = 30, nvlink_p2p: int = 0) -> None:
        self.gpus = gpus
        self.driver = driver
        self.cuda_driver = cuda_driver
        self.common_ancestor = common_ancestor
        self.nvlink_p2p = nvlink_p2p
        self.calls: list[str] = []

    def _gpu(self, handle: Any, fn: str) -> FakeGpu:
        self.calls.append(fn)
        gpu_ = self.gpus[handle]
        if fn in gpu_.unsupported:
            raise NVMLError_NotSupported(fn)
        return gpu_

    def nvmlInit(self) -> None: ...
    def nvmlSystemGetDriverVersion(self) -> str: return self.driver
    def nvmlSystemGetCudaDriverVersion(self) -> int: return self.cuda_driver
    def nvmlDeviceGetCount(self) -> int: return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        if not 0 <= index < len(self.gpus):
            raise NVMLError_InvalidArgument(index)
        return index

    def nvmlDeviceGetName(self, h): return self._gpu(h, "name").name
    def nvmlDeviceGetUUID(self, h): return self._gpu(h, "uuid").uuid
    def nvmlDeviceGetPciInfo(self, h): return SimpleNamespace(busId=self._gpu(h, "pci").bus_id.encode())

    def nvmlDeviceGetMemoryInfo(self, h):
        g = self._gpu(h, "memory")
        return SimpleNamespace(total=g.memory_total, used=g.memory_used, free=g.memory_total - g.memory_used)

    def nvmlDeviceGetUtilizationRates(self, h): return SimpleNamespace(gpu=self._gpu(h, "util").util, memory=5)
    def nvmlDeviceGetPowerUsage(self, h): return self._gpu(h, "power").power_mw
    def nvmlDeviceGetEnforcedPowerLimit(self, h): return self._gpu(h, "power_limit").power_limit_mw
    def nvmlDeviceGetTemperature(self, h, sensor): return self._gpu(h, "temperature").temperature
    def nvmlDeviceGetClockInfo(self, h, clock): return self._gpu(h, "clock").sm_clock

    def nvmlDeviceGetPcieThroughput(self, h, counter):
        g = self._gpu(h, "pcie")
        return g.pcie_tx if counter == 0 else g.pcie_rx

    def nvmlDeviceGetCurrPcieLinkGeneration(self, h): return self._gpu(h, "pcie_link").pcie_gen
    def nvmlDeviceGetCurrPcieLinkWidth(self, h): return self._gpu(h, "pcie_link").pcie_width
    def nvmlDeviceGetMaxPcieLinkGeneration(self, h): return self._gpu(h, "pcie_link").pcie_gen
    def nvmlDeviceGetMaxPcieLinkWidth(self, h): return self._gpu(h, "pcie_link").pcie_width
    def nvmlDeviceGetCudaComputeCapability(self, h): return self._gpu(h, "capability").capability

    def nvmlDeviceGetNvLinkState(self, h, link):
        g = self._gpu(h, "nvlink")
        if link >= len(g.nvlinks):
            raise NVMLError_InvalidArgument(link)
        return g.nvlinks[link]

    def nvmlDeviceGetNvLinkVersion(self, h, link):
        self._gpu(h, "nvlink")
        return 6  # NVML_NVLINK_VERSION_4_0

    def nvmlDeviceGetFieldValues(self, h, ids):
        g = self._gpu(h, "fields")
        return [SimpleNamespace(fieldId=fid, scopeId=link, nvmlReturn=0,
                                value=SimpleNamespace(ullVal=g.nvlink_kib)) for fid, link in ids]

    def nvmlDeviceGetComputeRunningProcesses(self, h):
        return [SimpleNamespace(pid=pid, usedGpuMemory=used) for pid, used in self._gpu(h, "processes").processes]

    def nvmlDeviceGetGraphicsRunningProcesses(self, h):
        self._gpu(h, "graphics")
        return []

    def nvmlDeviceGetTopologyCommonAncestor(self, a, b):
        self.calls.append("topology")
        return self.common_ancestor

    def nvmlDeviceGetP2PStatus(self, a, b, index):
        self.calls.append(f"p2p{index}")
        if index == self.NVML_P2P_CAPS_INDEX_NVLINK:
            return self.nvlink_p2p
        if not isinstance(index, int):
            raise TypeError("index must be an int")
        return self.NVML_P2P_STATUS_OK


def two_h200(**kwargs: Any) -> FakePynvml:
    return FakePynvml([FakeGpu(uuid="GPU-aaaa", bus_id="00000000:18:00.0", processes=[(4242, 2048 << 20)]),
                       FakeGpu(uuid="GPU-bbbb", bus_id="00000000:2A:00.0")], **kwargs)


def install(monkeypatch: pytest.MonkeyPatch, fake: FakePynvml | None, error: str | None = None) -> None:
    """Make diagnostics.nvml answer from `fake` (or, with None, fail to load with `error`)."""
    monkeypatch.setattr(nvml, "_state", {"initialised": True, "error": error, "pynvml": fake})
    monkeypatch.setattr(gpu, "_link_counts", {})
