"""What torch knows about this machine, gathered in a child process that prints one JSON object.

    python -m mgtutor.diagnostics.doctor.torchfacts          # prints {"torch": "2.11.0", "nccl": "2.28.9", …}

The TUI and `mgtutor doctor` never import torch (start-up stays fast and CUDA is never
initialised in the parent); they call `gather()`, which runs this module as a subprocess.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
from importlib import metadata
from typing import Any

# What a PyTorch maintainer asks for in a bug report (torch.utils.collect_env), plus ours.
PACKAGES = ("torch", "torchvision", "torchaudio", "numpy", "triton", "accelerate", "nvidia-ml-py", "textual",
            "psutil", "mgtutor")


def package_versions() -> dict[str, str]:
    """Installed versions of PACKAGES and every nvidia-* wheel (cuDNN, NCCL, cuBLAS…), read from metadata:
    nothing is imported, so this is cheap and safe in any process."""
    found: dict[str, str] = {}
    for dist in metadata.distributions():
        name = (dist.metadata["Name"] or "").lower()
        if name in PACKAGES or name.startswith("nvidia-"):
            found[name] = dist.version
    return dict(sorted(found.items()))


def tool_line(argv: list[str]) -> str | None:
    """The first line of `TOOL --version` (gcc, cmake, clang: what builds torch.compile's kernels and
    C++ extensions), or None when the tool is missing or fails."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=5, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    first = done.stdout.splitlines()[:1]
    return first[0].strip() if done.returncode == 0 and first else None


def gcc_version() -> str | None:
    return tool_line(["gcc", "--version"])


def cuda_runtime(packages: dict[str, str]) -> tuple[str | None, str | None]:
    """(version, where from) of the CUDA toolkit here, as collect_env reports it: nvcc's release,
    else the nvidia-cuda-runtime wheel that pip installed beside torch."""
    try:
        done = subprocess.run(["nvcc", "--version"], capture_output=True, text=True, timeout=10,
                              stdin=subprocess.DEVNULL)
        found = re.search(r"release [^,]+, V(\S+)", done.stdout)
        if done.returncode == 0 and found:
            return found.group(1), "nvcc"
    except (OSError, subprocess.TimeoutExpired):
        pass
    for name, version in packages.items():
        if name.startswith("nvidia-cuda-runtime"):
            return version, f"{name} wheel"
    return None, None


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


def gather(timeout: float = 120.0, python: str | None = None) -> dict[str, Any]:
    """Run this module in a child Python; its facts, or {"torch_error": why} if it failed."""
    argv = [python or sys.executable, "-m", "mgtutor.diagnostics.doctor.torchfacts"]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return {"torch_error": f"asking torch took longer than {timeout:.0f} s (a hung CUDA driver?)"}
    except OSError as exc:
        return {"torch_error": f"could not start Python: {exc}"}
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"torch_error": f"the torch probe failed (exit {done.returncode}): {tail}"}
    return json.loads(lines[-1])


if __name__ == "__main__":
    print(json.dumps(_facts()))
