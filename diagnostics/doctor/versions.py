"""Versions on this machine without importing torch: installed packages, compilers, the CUDA runtime;
and `gather()`, which asks torch itself in a child process (the worker `mgtutor.training.worker.probes.torchfacts`).

The TUI and `mgtutor doctor` never import torch (start-up stays fast and CUDA is never
initialised in the parent).
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


def is_cuda_wheel(name: str) -> bool:
    """torch and what pip installs beside its CUDA build: the nvidia-* libraries (not nvidia-ml-py, which
    reads the meters), triton, the cuda-* bindings."""
    return name in ("torch", "triton") or name.startswith("cuda-") or (name.startswith("nvidia-")
                                                                      and name != "nvidia-ml-py")


def torch_install_bytes() -> int | None:
    """Bytes on disk of torch and its CUDA wheels, summed from the wheels' RECORD files (nothing is
    imported or walked); None when torch is not installed here."""
    total, torch_found = 0, False
    for dist in metadata.distributions():
        name = (dist.metadata["Name"] or "").lower()
        if is_cuda_wheel(name):
            torch_found = torch_found or name == "torch"
            total += sum(f.size or 0 for f in dist.files or ())
    return total if torch_found else None


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


def gather(timeout: float = 120.0, python: str | None = None) -> dict[str, Any]:
    """Run the torch facts worker in a child Python; its facts, or {"torch_error": why} if it failed."""
    argv = [python or sys.executable, "-m", "mgtutor.training.worker.probes.torchfacts"]
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
