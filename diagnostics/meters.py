"""GPU and host meters: one NVML sweep per tick (≤ 1 Hz by default) and psutil for CPU/RAM/ranks.

    sampler = Sampler()                      # keep one; it rate-limits NVML and remembers CPU counters
    gpus, host = sampler.sample(pids=run_pids)
    for g in gpus.gpus: g.utilization_pct, g.memory_used_mib, g.processes …

Anything a GPU or driver does not support is None, never an exception. Without NVML at all,
`GpuSample.error` says why (no driver, no library) and `gpus` is empty. GPUs are listed by their
NVML index (the numbering of `nvidia-smi`), whatever CUDA_VISIBLE_DEVICES says, because meters
describe the machine, not one process's view of it.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import psutil

from mgtutor.training.runs import nvml

MIB = 1 << 20
# NVML field ids (stable numbers in nvml.h); per-link cumulative KiB counters.
FI_NVLINK_DATA_TX = 138
FI_NVLINK_DATA_RX = 139


@dataclass
class GpuProcess:
    pid: int
    used_memory_mib: int | None


@dataclass
class GpuSnapshot:
    index: int
    name: str
    uuid: str | None
    utilization_pct: int | None
    memory_used_mib: int | None
    memory_total_mib: int | None
    power_w: float | None
    power_limit_w: float | None
    temperature_c: int | None
    sm_clock_mhz: int | None
    pcie_tx_kbps: int | None  # KB/s, as NVML reports it
    pcie_rx_kbps: int | None
    nvlink_links_up: int | None
    processes: list[GpuProcess] = field(default_factory=list)
    nvlink_tx_kbps: float | None = None  # KB/s over the links that are up; needs two sweeps
    nvlink_rx_kbps: float | None = None


@dataclass
class GpuSample:
    t: float
    gpus: list[GpuSnapshot]
    error: str | None = None


@dataclass
class ProcessStats:
    pid: int
    cpu_percent: float
    rss_mib: float


@dataclass
class HostSnapshot:
    t: float
    cpu_percent_per_core: list[float]
    ram_used_mib: int
    ram_total_mib: int
    processes: dict[int, ProcessStats] = field(default_factory=dict)


_link_counts: dict[str, int] = {}  # uuid -> number of NVLink links NVML answers for (0 = none)
_link_lock = threading.Lock()


def nvlink_link_states(handle: Any, key: str | None = None) -> list[int]:
    """State (1 up, 0 down) of each NVLink link the GPU has; [] when it has none.

    Probing past the last link raises inside NVML, so the link count is learnt once per GPU."""
    lib = nvml.library()
    if lib is None:
        return []
    known = _link_counts.get(key) if key else None
    limit = known if known is not None else int(getattr(lib, "NVML_NVLINK_MAX_LINKS", 18))
    states: list[int] = []
    for link in range(limit):
        state = nvml.query("nvmlDeviceGetNvLinkState", handle, link)
        if state is None:
            if known is None:
                break
            state = 0
        states.append(int(state))
    if key and known is None:
        with _link_lock:
            _link_counts[key] = len(states)
    return states


def _nvlink_counters(handle: Any, up_links: list[int]) -> tuple[int, int] | None:
    """Cumulative NVLink data KiB (tx, rx) summed over `up_links`, or None if NVML has no counters."""
    if not up_links:
        return None
    ids = [(fid, link) for link in up_links for fid in (FI_NVLINK_DATA_TX, FI_NVLINK_DATA_RX)]
    values = nvml.query("nvmlDeviceGetFieldValues", handle, ids)
    if values is None:
        return None
    tx = rx = 0
    for item in values:
        if getattr(item, "nvmlReturn", 1) != 0:
            return None
        amount = int(item.value.ullVal)
        if item.fieldId == FI_NVLINK_DATA_TX:
            tx += amount
        else:
            rx += amount
    return tx, rx


def _power_w(milliwatts: Any) -> float | None:
    return None if milliwatts is None else round(milliwatts / 1000.0, 1)


def _processes(handle: Any) -> list[GpuProcess]:
    seen: dict[int, GpuProcess] = {}
    for fn in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"):
        for proc in nvml.query(fn, handle, default=None) or []:
            used = getattr(proc, "usedGpuMemory", None)
            # NVML reports "not available" as None or as a huge sentinel value.
            mib = int(used) // MIB if isinstance(used, int) and used < (1 << 62) else None
            if proc.pid not in seen or seen[proc.pid].used_memory_mib is None:
                seen[proc.pid] = GpuProcess(pid=int(proc.pid), used_memory_mib=mib)
    return sorted(seen.values(), key=lambda p: p.pid)


def snapshot_gpu(index: int, handle: Any) -> GpuSnapshot:
    """Every meter of one GPU; what NVML cannot answer is None."""
    return _snapshot(index, handle)[0]


@dataclass
class _StaticInfo:
    """What changes rarely or never: read once per `STATIC_REFRESH_S`, not on every sweep."""
    name: str
    uuid: str | None
    power_limit_w: float | None
    link_states: list[int]
    read_at: float


STATIC_REFRESH_S = 30.0


def _static_info(handle: Any) -> _StaticInfo:
    uuid = nvml.query("nvmlDeviceGetUUID", handle)
    return _StaticInfo(name=nvml.query("nvmlDeviceGetName", handle, default="NVIDIA GPU"), uuid=uuid,
                       power_limit_w=_power_w(nvml.query("nvmlDeviceGetEnforcedPowerLimit", handle)),
                       link_states=nvlink_link_states(handle, uuid), read_at=time.monotonic())


def _pcie_throughput(handle: Any) -> tuple[int | None, int | None]:
    """NVML samples PCIe traffic over about 20 ms per call, so callers ask for it sparingly."""
    lib = nvml.library()
    return (nvml.query("nvmlDeviceGetPcieThroughput", handle, getattr(lib, "NVML_PCIE_UTIL_TX_BYTES", 0)),
            nvml.query("nvmlDeviceGetPcieThroughput", handle, getattr(lib, "NVML_PCIE_UTIL_RX_BYTES", 1)))


def _snapshot(index: int, handle: Any, static: _StaticInfo | None = None,
              pcie: tuple[int | None, int | None] | None = None) -> tuple[GpuSnapshot, list[int]]:
    lib = nvml.library()
    static = static or _static_info(handle)
    pcie = pcie or _pcie_throughput(handle)
    util = nvml.query("nvmlDeviceGetUtilizationRates", handle)
    memory = nvml.query("nvmlDeviceGetMemoryInfo", handle)
    temp_sensor = getattr(lib, "NVML_TEMPERATURE_GPU", 0)
    states = static.link_states
    snap = GpuSnapshot(
        index=index,
        name=static.name,
        uuid=static.uuid,
        utilization_pct=None if util is None else int(util.gpu),
        memory_used_mib=None if memory is None else int(memory.used) // MIB,
        memory_total_mib=None if memory is None else int(memory.total) // MIB,
        power_w=_power_w(nvml.query("nvmlDeviceGetPowerUsage", handle)),
        power_limit_w=static.power_limit_w,
        temperature_c=nvml.query("nvmlDeviceGetTemperature", handle, temp_sensor),
        sm_clock_mhz=nvml.query("nvmlDeviceGetClockInfo", handle, getattr(lib, "NVML_CLOCK_SM", 1)),
        pcie_tx_kbps=pcie[0],
        pcie_rx_kbps=pcie[1],
        nvlink_links_up=sum(states) if states else None,
        processes=_processes(handle),
    )
    return snap, states


def gpu_handles() -> list[tuple[int, Any]]:
    """(NVML index, handle) for every GPU NVML sees; [] without NVML."""
    count = nvml.query("nvmlDeviceGetCount", default=0) or 0
    handles = [(i, nvml.query("nvmlDeviceGetHandleByIndex", i)) for i in range(count)]
    return [(i, h) for i, h in handles if h is not None]


def sample_gpus() -> GpuSample:
    """One NVML sweep over every GPU. Prefer `Sampler.sample`, which limits the rate."""
    now = time.time()
    if nvml.library() is None:
        return GpuSample(t=now, gpus=[], error=nvml.init_error())
    gpus = [snapshot_gpu(i, h) for i, h in gpu_handles()]
    return GpuSample(t=now, gpus=gpus, error=None if gpus else "NVML sees no GPU")


_host_procs: dict[int, psutil.Process] = {}
_host_lock = threading.Lock()


def _process_stats(pid: int) -> ProcessStats | None:
    """CPU% since the last call for this pid (psutil keeps the counter in the Process object)."""
    with _host_lock:
        proc = _host_procs.get(pid)
        if proc is None or not proc.is_running():  # is_running also catches a reused pid
            try:
                proc = psutil.Process(pid)
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                _host_procs.pop(pid, None)
                return None
            _host_procs[pid] = proc
    try:
        with proc.oneshot():
            return ProcessStats(pid=pid, cpu_percent=proc.cpu_percent(None),
                                rss_mib=round(proc.memory_info().rss / MIB, 1))
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        with _host_lock:
            _host_procs.pop(pid, None)
        return None


def sample_host(pids: Iterable[int] = ()) -> HostSnapshot:
    """CPU per core (since the previous call), RAM, and CPU/RSS of each given process still alive."""
    memory = psutil.virtual_memory()
    stats = {pid: s for pid in dict.fromkeys(pids) if (s := _process_stats(pid)) is not None}
    return HostSnapshot(
        t=time.time(), cpu_percent_per_core=[float(x) for x in psutil.cpu_percent(interval=None, percpu=True)],
        ram_used_mib=int(memory.total - memory.available) // MIB, ram_total_mib=int(memory.total) // MIB,
        processes=stats,
    )


class Sampler:
    """Rate-limited sampling: NVML is swept at most once per `min_interval` seconds (the cached
    sample is returned in between); NVLink throughput is the counter delta between two sweeps."""

    def __init__(self, min_interval: float = 1.0, pcie_every: int = 5) -> None:
        self.min_interval = min_interval
        # PCIe throughput (~8 ms wall per GPU) and NVLink counters (~16 ms CPU per GPU) on every Nth sweep
        self.pcie_every = pcie_every
        self._static: dict[int, _StaticInfo] = {}
        self._pcie: dict[int, tuple[int | None, int | None]] = {}
        self._nvlink_rates: dict[int, tuple[float, float]] = {}
        self._handle_list: list[tuple[int, Any]] = []
        self._handles_at = float("-inf")
        self._lock = threading.Lock()
        self._last: GpuSample | None = None
        self._last_mono = 0.0
        self._counters: dict[int, tuple[float, tuple[int, int]]] = {}
        self.sweeps = 0

    def _sweep(self) -> GpuSample:
        now = time.time()
        if nvml.library() is None:
            return GpuSample(t=now, gpus=[], error=nvml.init_error())
        gpus = []
        for index, handle in self._handles():
            static = self._static.get(index)
            if static is None or time.monotonic() - static.read_at > STATIC_REFRESH_S:
                static = self._static[index] = _static_info(handle)
            slow_sweep = index not in self._pcie or self.sweeps % self.pcie_every == 0
            if slow_sweep:
                self._pcie[index] = _pcie_throughput(handle)
            snap, states = _snapshot(index, handle, static, self._pcie[index])
            # NVLink counters cost ~16 ms of CPU per GPU (one field per link): read them on slow sweeps
            counters = _nvlink_counters(handle, [i for i, s in enumerate(states) if s]) if slow_sweep else None
            previous = self._counters.get(index)
            if counters is not None:
                mono = time.monotonic()
                if previous is not None and mono > previous[0]:
                    dt = mono - previous[0]
                    self._nvlink_rates[index] = (max(0.0, (counters[0] - previous[1][0]) * 1.024 / dt),
                                                 max(0.0, (counters[1] - previous[1][1]) * 1.024 / dt))
                self._counters[index] = (mono, counters)
            snap.nvlink_tx_kbps, snap.nvlink_rx_kbps = self._nvlink_rates.get(index, (None, None))
            gpus.append(snap)
        return GpuSample(t=now, gpus=gpus, error=None if gpus else "NVML sees no GPU")

    def _handles(self) -> list[tuple[int, Any]]:
        if time.monotonic() - self._handles_at > STATIC_REFRESH_S:
            self._handle_list, self._handles_at = gpu_handles(), time.monotonic()
        return self._handle_list

    def sample_gpus(self) -> GpuSample:
        with self._lock:
            mono = time.monotonic()
            if self._last is None or mono - self._last_mono >= self.min_interval:
                self._last = self._sweep()
                self._last_mono = mono
                self.sweeps += 1
            return self._last

    def sample(self, pids: Iterable[int] = ()) -> tuple[GpuSample, HostSnapshot]:
        return self.sample_gpus(), sample_host(pids)

    def row(self, rank_of_pid: Mapping[int, int]) -> dict[str, Any]:
        """One row of a run's samples.jsonl (training/runs/follow/samples.py): every GPU, the host, each rank."""
        gpus, host = self.sample(pids=list(rank_of_pid))
        cores = host.cpu_percent_per_core
        return {"t": round(gpus.t, 3), "gpu_error": gpus.error,
                "gpus": [{"index": g.index, "name": g.name, "util_pct": g.utilization_pct,
                          "mem_used_mib": g.memory_used_mib, "mem_total_mib": g.memory_total_mib,
                          "power_w": g.power_w, "temp_c": g.temperature_c} for g in gpus.gpus],
                "host": {"cpu_pct": round(sum(cores) / len(cores), 1) if cores else None,
                         "ram_used_mib": host.ram_used_mib, "ram_total_mib": host.ram_total_mib},
                "ranks": {str(rank_of_pid[pid]): {"pid": pid, "cpu_pct": s.cpu_percent, "rss_mib": s.rss_mib}
                          for pid, s in host.processes.items() if pid in rank_of_pid}}
