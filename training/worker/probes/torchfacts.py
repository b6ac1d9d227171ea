"""What torch knows about this machine, printed as one JSON object by a child process:

    python -m mgtutor.training.worker.probes.torchfacts          # prints {"torch": "2.11.0", "nccl": "2.28.9", …}

`mgtutor.diagnostics.doctor.versions.gather()` runs it; nothing in the TUI's process imports it.
"""
from __future__ import annotations

import json
import sys
from typing import Any

from mgtutor.diagnostics.doctor.versions import cuda_runtime, gcc_version, package_versions, tool_line


def _facts() -> dict[str, Any]:
    packages = package_versions()
    runtime, runtime_from = cuda_runtime(packages)
    facts: dict[str, Any] = {"python": sys.version.split()[0], "executable": sys.executable,
                             "packages": packages, "gcc": gcc_version(), "cmake": tool_line(["cmake", "--version"]),
                             "clang": tool_line(["clang", "--version"]),
                             "cuda_runtime": runtime, "cuda_runtime_from": runtime_from}
    try:
        import torch
    except Exception as exc:  # torch missing or broken: say which
        facts["torch_error"] = f"{type(exc).__name__}: {exc}"
        return facts
    import torch.distributed as dist

    facts.update({
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "debug": bool(getattr(torch.version, "debug", False)),
        "hip": getattr(torch.version, "hip", None),
        "cudnn": None, "nccl": None,
        "distributed": dist.is_available(),
        "nccl_available": dist.is_available() and dist.is_nccl_available(),
        "gloo_available": dist.is_available() and dist.is_gloo_available(),
        "arch_list": [], "cuda_available": False, "device_count": 0, "devices": [],
    })
    try:
        version = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
        facts["cudnn"] = _dotted_cudnn(version)
    except Exception:
        pass
    try:
        if torch.version.cuda:
            nccl = torch.cuda.nccl.version()
            facts["nccl"] = ".".join(map(str, nccl)) if isinstance(nccl, tuple) else str(nccl)
    except Exception:
        pass
    try:
        facts["cuda_available"] = torch.cuda.is_available()
        facts["arch_list"] = torch.cuda.get_arch_list() if torch.version.cuda else []
        if facts["cuda_available"]:
            facts["device_count"] = torch.cuda.device_count()
            for i in range(facts["device_count"]):
                props = torch.cuda.get_device_properties(i)
                facts["devices"].append({"index": i, "name": props.name,
                                         "capability": [props.major, props.minor],
                                         "memory_total_mib": props.total_memory // (1 << 20)})
    except Exception as exc:  # e.g. a driver too old for this build
        facts["cuda_error"] = f"{type(exc).__name__}: {exc}"
    return facts


def _dotted_cudnn(version: int | None) -> str | None:
    """cuDNN reports 90100 for 9.1.0 (and 8902 for 8.9.2 before version 9)."""
    if not version:
        return None
    if version >= 10000:
        return f"{version // 10000}.{version % 10000 // 100}.{version % 100}"
    return f"{version // 1000}.{version % 1000 // 100}.{version % 100}"


if __name__ == "__main__":
    print(json.dumps(_facts()))
