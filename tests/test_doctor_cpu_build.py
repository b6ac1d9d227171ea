"""`mgtutor doctor` on a machine with no NVIDIA GPU says when torch is the CUDA build, how much of the
disk it and its CUDA libraries take, and the command that puts the CPU build in its place (issue 45,
item 8). NVML is faked at its boundary (no GPU); the last test reads the real doctor's report of the
torch installed here."""
from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import pytest
from fake_nvml import install

from mgtutor.diagnostics.doctor.report import collect, render_text
from mgtutor.diagnostics.schema import errors, load_schema
from test_doctor import TORCH_OK, by_id

CPU_INDEX = "--index-url https://download.pytorch.org/whl/cpu"


def no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    install(monkeypatch, None, error="no NVIDIA driver: libnvidia-ml.so was not found")


def test_the_cuda_build_without_a_gpu_is_named_with_the_command_for_the_cpu_build(monkeypatch):
    no_gpu(monkeypatch)
    facts = {**TORCH_OK, "cuda_available": False, "device_count": 0, "executable": "/opt/env/bin/python",
             "packages": {"torch": "2.11.0+cu130", "torchvision": "0.26.0+cu130", "numpy": "2.1.0"}}
    report = collect(torch=facts)
    assert errors(report, load_schema("doctor")) == []
    build = by_id(report)["torch_build"]
    assert build["status"] == "warn"
    assert build["message"].startswith("torch 2.11.0+cu130 is the CUDA 13.0 build")
    assert build["fix"].count("/opt/env/bin/python -m pip") == 2  # the Python that runs torch, whatever PATH says
    assert "uninstall -y torch torchvision && " in build["fix"] and f"install torch torchvision {CPU_INDEX}" in build["fix"]
    assert "CUDA 13.0 build" in render_text(report) and CPU_INDEX in render_text(report)


def test_a_cpu_build_or_a_gpu_machine_gets_no_such_hint(monkeypatch):
    no_gpu(monkeypatch)
    assert "torch_build" not in by_id(collect(torch={**TORCH_OK, "torch": "2.11.0+cpu", "cuda": None}))


@pytest.mark.integration
@pytest.mark.xdist_group("doctor")
def test_the_real_doctor_here_says_what_the_installed_torch_is(doctor_runs):
    report = json.loads(doctor_runs["english json"].stdout)
    cuda, size = report["versions"]["cuda"], report["versions"]["torch_install_bytes"]
    checks = by_id(report)
    if not cuda:  # a CPU build here: nothing to say
        assert "torch_build" not in checks and size is None
        return
    torch_dir = Path(importlib.util.find_spec("torch").submodule_search_locations[0])
    on_disk = sum(entry.stat().st_size for entry in torch_dir.rglob("*") if entry.is_file() and not entry.is_symlink())
    assert size >= on_disk * 0.9  # torch's own folder, and its CUDA wheels beside it
    message = checks["torch_build"]["message"]
    assert f"is the CUDA {cuda} build: {size / 1e9:.1f} GB" in message, message
    assert CPU_INDEX in checks["torch_build"]["fix"]
