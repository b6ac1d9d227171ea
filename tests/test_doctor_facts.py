"""What collect_env prints, the doctor prints too (issue 27, items 7 and 14): CPU vendor/family/model,
sockets × cores × threads, caches, NUMA nodes, the flags that matter, hypervisor, CUDA runtime,
CMake/Clang, the allocator config; and never a secret's value, on screen or in doctor.json."""
from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest
from conftest import mgtutor_argv, no_gpu_env

from mgtutor.diagnostics.doctor import saved
from mgtutor.diagnostics.doctor.hostinfo import cpu_details, report_lines
from mgtutor.diagnostics.doctor.report import collect, environment, render_text
from mgtutor.diagnostics.schema import errors, load_schema
from mgtutor.training.runs.records.record import state_home

SECRET = "hf_d0ctor-s3cret"
CPUINFO = "".join(
    f"processor\t: {n}\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 143\n"
    f"model name\t: Intel(R) Xeon(R) Platinum 8480+\nstepping\t: 8\nphysical id\t: {n // 8}\n"
    f"siblings\t: 8\ncpu cores\t: 4\nflags\t\t: fpu sse4_2 avx avx2 fma hypervisor avx512f avx512_bf16 amx_tile amx_bf16\n\n"
    for n in range(16))


def fake_sys(root: Path) -> Path:
    """The /sys files lscpu reads, for a 2-socket VM with 2 NUMA nodes."""
    for index, (level, kind, size, shared) in enumerate([(1, "Data", "48K", "0-1"), (1, "Instruction", "32K", "0-1"),
                                                         (2, "Unified", "2048K", "0-1"), (3, "Unified", "107520K", "0-7")]):
        folder = root / "devices/system/cpu/cpu0/cache" / f"index{index}"
        folder.mkdir(parents=True)
        for name, value in (("level", level), ("type", kind), ("size", size), ("shared_cpu_list", shared)):
            (folder / name).write_text(f"{value}\n")
    for node in ("node0", "node1"):
        (root / "devices/system/node" / node).mkdir(parents=True)
    (root / "devices/system/node/online").write_text("0-1\n")
    dmi = root / "class/dmi/id"
    dmi.mkdir(parents=True)
    (dmi / "sys_vendor").write_text("QEMU\n")
    (dmi / "product_name").write_text("Standard PC (Q35 + ICH9, 2009)\n")
    return root


def test_cpu_details_read_like_lscpu(tmp_path: Path) -> None:
    cpu = cpu_details(CPUINFO, fake_sys(tmp_path))
    assert (cpu["vendor"], cpu["family"], cpu["model"], cpu["stepping"]) == ("GenuineIntel", 6, 143, 8)
    assert (cpu["sockets"], cpu["cores_per_socket"], cpu["threads_per_core"], cpu["logical_cpus"]) == (2, 4, 2, 16)
    assert cpu["numa_nodes"] == 2
    assert [(c["level"], c["type"], c["size"], c["shared_by"]) for c in cpu["caches"]][-1] == (3, "Unified", "107520K", 8)
    assert cpu["flags"] == ["sse4_2", "avx", "avx2", "fma", "avx512f", "avx512_bf16", "amx_tile", "amx_bf16"]
    assert cpu["hypervisor"] == "QEMU Standard PC (Q35 + ICH9, 2009)"


def test_bare_metal_has_no_hypervisor_and_missing_sys_files_are_unknown(tmp_path: Path) -> None:
    cpu = cpu_details(CPUINFO.replace(" hypervisor", ""), tmp_path)
    assert cpu["hypervisor"] is None and cpu["numa_nodes"] is None and cpu["caches"] == []


def test_the_report_carries_every_collect_env_fact_in_text_and_json(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")
    facts = {"python": "3.12.3", "torch": "2.11.0+cu130", "cuda": "13.0", "cuda_runtime": "13.0.88",
             "cuda_runtime_from": "nvcc", "cmake": "cmake version 3.28.3",
             "clang": "Ubuntu clang version 18.1.3 (1ubuntu1)", "gcc": "gcc (GCC) 13.2.0"}
    report = collect(torch=facts)
    report["host"]["cpu"] = cpu_details(CPUINFO, fake_sys(tmp_path))
    assert errors(report, load_schema("doctor")) == []
    assert report["versions"]["cuda_runtime"] == "13.0.88"
    assert report["allocator"]["PYTORCH_CUDA_ALLOC_CONF"] == "expandable_segments:True"
    text = "\n".join(report_lines(report))
    for fact in ("GenuineIntel family 6 model 143 stepping 8", "2 socket(s) × 4 cores × 2", "2 NUMA node(s)",
                 "L1d 48K", "L3 107520K", "avx512f", "amx_bf16", "hypervisor: QEMU", "CUDA runtime 13.0.88 (nvcc)",
                 "CMake 3.28.3", "Clang 18.1.3", "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"):
        assert fact in " ".join(text.split()), fact
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "CUDA runtime 13.0.88" in render_text(report)


def test_a_secret_looking_variable_is_never_printed_or_saved(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("TORCH_HUB_TOKEN", "NCCL_IB_KEY", "MASTER_PASSWORD", "PYTORCH_SECRET"):
        monkeypatch.setenv(name, SECRET)
    monkeypatch.setenv("NCCL_DEBUG", "INFO")
    env = environment()
    assert env["TORCH_HUB_TOKEN"] == "<redacted>" and env["NCCL_DEBUG"] == "INFO"
    report = collect(torch={"python": "3.12.3"})
    assert SECRET not in render_text(report) and SECRET not in json.dumps(report)
    old = os.umask(0o022)
    try:
        path = saved.save("doctor", report)
    finally:
        os.umask(old)
    assert SECRET not in path.read_text()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    for folder in (path.parent, state_home()):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder


def test_a_report_saved_before_secrets_were_hidden_is_shown_without_them() -> None:
    path = saved.save("doctor", {"environment": {"TORCH_HUB_TOKEN": SECRET, "NCCL_DEBUG": "INFO"}})
    assert SECRET in path.read_text()  # as an older mgtutor left it
    assert saved.load("doctor")["environment"] == {"TORCH_HUB_TOKEN": "<redacted>", "NCCL_DEBUG": "INFO"}


@pytest.mark.integration
def test_doctor_json_on_this_machine_hides_the_token_and_keeps_its_file_private(xdg_homes: Path) -> None:
    env = {**no_gpu_env(), "TORCH_HUB_TOKEN": SECRET, "XDG_STATE_HOME": str(xdg_homes / "xdg_state_home")}
    done = subprocess.run(mgtutor_argv("doctor", "--json"), capture_output=True, text=True, timeout=300, env=env)
    assert SECRET not in done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["environment"]["TORCH_HUB_TOKEN"] == "<redacted>"
    assert errors(report, load_schema("doctor")) == []
    assert "cuda_runtime" in report["versions"] and "cmake" in report["host"] and report["host"]["cpu"]["vendor"]
    saved_file = xdg_homes / "xdg_state_home" / "mgtutor" / "diagnostics" / "doctor.json"
    assert SECRET not in saved_file.read_text() and stat.S_IMODE(saved_file.stat().st_mode) == 0o600
