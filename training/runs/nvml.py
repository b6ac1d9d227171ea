"""NVML behind a small API that answers "not available" instead of raising.

The TUI and the launcher learn what GPUs exist from here (no torch, no CUDA context). Every
NVML call goes through `query`, which turns an NVML error or a missing function into a default.
"""
from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from typing import Any, Callable

from mgtutor.training.foundation.i18n import N_, _
from mgtutor.training.foundation.said import Said

_lock = threading.Lock()
_state: dict[str, Any] = {"initialised": False, "error": None, "pynvml": None}

NOT_AVAILABLE = None
# Why no GPU is seen: kept in English in records (meta.json, doctor's report), said with `said()`.
NO_START = N_("NVML could not start: {why}")
PLAIN_REASONS = (  # the reasons without an argument, which reason_said knows again in a record
    DISABLED := N_("NVML disabled by MGTUTOR_NO_NVML"),
    NO_PACKAGE := N_("the nvidia-ml-py package is not installed"),
    NO_DRIVER := N_("no NVIDIA driver: libnvidia-ml.so was not found"),
    HIDDEN := N_("CUDA_VISIBLE_DEVICES hides every GPU"),
    NONE_SEEN := N_("NVML sees no GPU"),
    NONE_FOUND := N_("none found"),
)
NO_GPU_SUMMARY = N_("no NVIDIA GPU ({why}): CPU ranks on gloo")
GPU_SUMMARY = N_("{count}× {names} (driver {driver}): ranks on NCCL")


def library() -> Any | None:
    """The pynvml module, initialised once; None with `init_error()` saying why."""
    with _lock:
        if _state["initialised"]:
            return _state["pynvml"]
        _state["initialised"] = True
        if os.environ.get("MGTUTOR_NO_NVML"):
            _state["error"] = DISABLED
            return None
        try:
            import pynvml
        except ImportError:
            _state["error"] = NO_PACKAGE
            return None
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError_LibraryNotFound:
            _state["error"] = NO_DRIVER
            return None
        except pynvml.NVMLError as exc:
            _state["error"] = NO_START.format(why=exc)
            return None
        _state["pynvml"] = pynvml
        return pynvml


def reason_said(error: str | None) -> Said | str:
    """Why no GPU is seen, as a message id with its arguments where it is one of ours, to keep in a record."""
    start = NO_START.split("{", 1)[0]
    if error and error.startswith(start):
        return Said(NO_START, why=error[len(start):])
    return Said(error) if error in PLAIN_REASONS else error or ""


def said(error: str | None) -> str:
    """Why no GPU is seen (an English record) in the language in force."""
    if not error:
        return ""
    start = NO_START.split("{", 1)[0]
    if error.startswith(start):
        return _(NO_START).format(why=error[len(start):])
    return _(error)


def init_error() -> str | None:
    library()
    return _state["error"]


def query(fn: Callable[..., Any] | str, *args: Any, default: Any = NOT_AVAILABLE) -> Any:
    """Call an NVML function by object or name; any NVML error gives `default`."""
    nvml = library()
    if nvml is None:
        return default
    func = getattr(nvml, fn, None) if isinstance(fn, str) else fn
    if func is None:
        return default
    try:
        value = func(*args)
    except (nvml.NVMLError, OSError, AttributeError, TypeError):
        return default
    return value.decode() if isinstance(value, bytes) else value


@dataclass
class GpuInfo:
    index: int
    name: str
    memory_total_mib: int | None
    uuid: str | None


@dataclass
class Inventory:
    gpus: list[GpuInfo] = field(default_factory=list)
    driver: str | None = None
    error: str | None = None  # why no GPU is seen, when none is

    @property
    def summary_said(self) -> Said:
        """The summary as a message id with its arguments (a run record keeps it so)."""
        if not self.gpus:
            return Said(NO_GPU_SUMMARY, why=reason_said(self.error or NONE_FOUND))
        names = ", ".join(sorted({g.name for g in self.gpus}))
        return Said(GPU_SUMMARY, count=len(self.gpus), names=names, driver=self.driver or "?")

    @property
    def summary(self) -> str:
        if not self.gpus:
            return NO_GPU_SUMMARY.format(why=self.error or NONE_FOUND)
        names = sorted({g.name for g in self.gpus})
        return GPU_SUMMARY.format(count=len(self.gpus), names=", ".join(names), driver=self.driver or "?")


def _visible(indices: list[int], uuids: dict[int, str | None]) -> list[int]:
    """Apply CUDA_VISIBLE_DEVICES (indices or UUID prefixes) the way CUDA would."""
    raw = os.environ.get("CUDA_VISIBLE_DEVICES")
    if raw is None:
        return indices
    chosen: list[int] = []
    for item in (part.strip() for part in raw.split(",")):
        if not item:
            break
        if item.lstrip("-").isdigit():
            idx = int(item)
            if idx < 0 or idx not in indices:
                break  # CUDA stops at the first invalid entry
            chosen.append(idx)
        else:
            match = [i for i, u in uuids.items() if u and u.startswith(item)]
            if len(match) != 1:
                break
            chosen.append(match[0])
    return chosen


def inventory() -> Inventory:
    """The GPUs this process could use (CUDA_VISIBLE_DEVICES honoured), or why there are none."""
    nvml = library()
    if nvml is None:
        return Inventory(error=init_error())
    count = query("nvmlDeviceGetCount", default=0)
    handles = {i: query("nvmlDeviceGetHandleByIndex", i) for i in range(count)}
    uuids = {i: query("nvmlDeviceGetUUID", h) for i, h in handles.items() if h is not None}
    gpus = []
    for position, index in enumerate(_visible(sorted(uuids), uuids)):
        handle = handles[index]
        memory = query("nvmlDeviceGetMemoryInfo", handle)
        gpus.append(GpuInfo(index=position, name=query("nvmlDeviceGetName", handle, default="NVIDIA GPU"),
                            memory_total_mib=memory.total // (1 << 20) if memory else None, uuid=uuids[index]))
    error = None if gpus else (HIDDEN if count else NONE_SEEN)
    return Inventory(gpus=gpus, driver=query("nvmlSystemGetDriverVersion"), error=error)
