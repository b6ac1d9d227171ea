"""The doctor: checks judged from facts (NVML faked at its boundary), and the real CLI on this machine."""
from __future__ import annotations

import json
import subprocess

import pytest
from conftest import mgtutor_argv, no_gpu_env
from fake_nvml import FakeGpu, FakePynvml, install, two_h200

from mgtutor.diagnostics.doctor.report import collect, render_markdown, render_text, worst
from mgtutor.diagnostics.schema import errors, load_schema
from mgtutor.diagnostics.doctor.topology import read_topology

TORCH_OK = {"python": "3.12.3", "torch": "2.11.0+cu130", "cuda": "13.0", "cudnn": "9.10.2", "nccl": "2.28.9",
            "distributed": True, "nccl_available": True, "gloo_available": True, "cuda_available": True,
            "device_count": 2, "arch_list": ["sm_80", "sm_90", "sm_100"], "devices": []}


def by_id(report: dict) -> dict:
    return {c["id"]: c for c in report["checks"]}


def test_two_nvlinked_gpus_pass_and_the_report_follows_the_schema(monkeypatch):
    install(monkeypatch, two_h200())
    report = collect(torch=TORCH_OK)
    assert errors(report, load_schema("doctor")) == []
    assert [g["name"] for g in report["gpus"]] == ["NVIDIA H200", "NVIDIA H200"]
    assert report["gpus"][0]["compute_capability"] == "9.0" and report["gpus"][0]["nvlink_links_up"] == 18
    assert report["versions"]["nccl"] == "2.28.9" and report["versions"]["driver_cuda"] == "13.0"
    pair = report["topology"]["pairs"][0]
    assert pair["kind"] == "nvlink" and pair["label"] == "NV18"  # although the PCIe ancestor is the host bridge
    checks = by_id(report)
    assert checks["link_0_1"]["status"] == "ok" and "NVLink 4 ×18" in checks["link_0_1"]["message"]
    assert checks["driver"]["status"] == "ok" and checks["nccl"]["status"] == "ok"
    text = render_text(report)
    assert "NV18" in text and "NCCL 2.28.9" in text and "GPU1" in text


def test_pcie_only_without_p2p_is_a_warning_with_a_fix(monkeypatch):
    fake = FakePynvml([FakeGpu(uuid="a", nvlinks=[]), FakeGpu(uuid="b", nvlinks=[])], nvlink_p2p=5)
    fake.nvmlDeviceGetP2PStatus = lambda a, b, index: 5  # P2P not supported at all
    install(monkeypatch, fake)
    topo = read_topology()
    assert topo.pairs[0].kind == "pcie" and topo.pairs[0].label == "PHB" and topo.pairs[0].p2p is False
    check = by_id(collect(torch=TORCH_OK))["link_0_1"]
    assert check["status"] == "warn" and "P2P disabled" in check["message"] and "ACS" in check["fix"]


def test_old_driver_and_unsupported_arch_fail(monkeypatch):
    fake = FakePynvml([FakeGpu(capability=(7, 0), nvlinks=[])], cuda_driver=12020)
    install(monkeypatch, fake)
    report = collect(torch=TORCH_OK)
    checks = by_id(report)
    assert checks["driver"]["status"] == "fail" and "12.2" in checks["driver"]["message"]
    assert checks["arch_gpu0"]["status"] == "fail"
    assert worst(report) == "fail"


def test_environment_traps_are_reported(monkeypatch):
    install(monkeypatch, two_h200())
    monkeypatch.setenv("NCCL_P2P_DISABLE", "1")
    monkeypatch.setenv("NCCL_SOCKET_IFNAME", "nosuchnic9")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    report = collect(torch=TORCH_OK)
    checks = by_id(report)
    assert checks["nccl_p2p_disable"]["status"] == "warn"
    assert checks["nccl_socket_ifname"]["status"] == "fail"
    assert checks["cuda_visible_devices"]["status"] == "fail"
    assert report["environment"]["NCCL_P2P_DISABLE"] == "1"


def test_broken_torch_is_a_failure_not_a_crash(monkeypatch):
    install(monkeypatch, None, error="no NVIDIA driver: libnvidia-ml.so was not found")
    report = collect(torch={"python": "3.11", "torch_error": "ModuleNotFoundError: No module named 'torch'"})
    assert by_id(report)["torch"]["status"] == "fail"
    assert errors(report, load_schema("doctor")) == []


@pytest.mark.integration
@pytest.mark.xdist_group("doctor")
def test_cli_doctor_json_on_this_machine_says_no_gpu_clearly(doctor_runs):
    done = doctor_runs["english json"]
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert errors(report, load_schema("doctor")) == []
    assert report["gpus"] == [] and "MGTUTOR_NO_NVML" in report["gpu_error"]
    gpu = by_id(report)["gpu"]
    assert gpu["status"] == "warn" and "no NVIDIA GPU" in gpu["message"]
    assert report["versions"]["torch"]  # came from the torch subprocess
    assert report["host"]["cpu_cores"] >= 1
    # what collect_env reports and a maintainer asks for: the OS, the CPU, the library versions
    assert report["host"]["os"] and report["host"]["cpu_model"] and report["host"]["kernel"]
    assert report["packages"]["torch"] and report["packages"]["numpy"] and "torchvision" in report["packages"]


def test_text_report_has_a_host_line_and_packages_and_markdown_keeps_it_whole(monkeypatch):
    install(monkeypatch, two_h200())
    report = collect(torch={**TORCH_OK, "packages": {"torch": "2.11.0", "numpy": "2.1.0",
                                                      "nvidia-nccl-cu13": "2.28.9"}, "gcc": "gcc (GCC) 13.2.0"})
    text = render_text(report)
    host_line = next(line for line in text.splitlines() if line.startswith("Host: "))
    assert report["host"]["os"] in host_line and report["host"]["kernel"] in host_line
    assert "torch==2.11.0" in text and "nvidia-nccl-cu13==2.28.9" in text and "GCC 13.2.0" in text
    assert max(len(line) for line in text.splitlines()[text.splitlines().index("Packages"):][:4]) <= 80
    markdown = render_markdown(report)
    assert markdown.startswith("### mgtutor doctor") and f"```text\n{text}\n```" in markdown


def test_cuda_visible_devices_without_gpus_is_not_a_pass(monkeypatch):
    install(monkeypatch, FakePynvml(gpus=[]))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    assert by_id(collect(torch=TORCH_OK))["cuda_visible_devices"]["status"] == "warn"
    install(monkeypatch, two_h200())
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,3")
    check = by_id(collect(torch=TORCH_OK))["cuda_visible_devices"]
    assert check["status"] == "fail" and "GPU 3" in check["message"]


@pytest.mark.parametrize("args, words", [
    (["--rendezvous", "--timeout", "-3"], "--timeout"),
    (["--rendezvous", "--nproc", "2", "--skip-rank", "5"], "--skip-rank 5"),
])
@pytest.mark.integration
def test_cli_bad_input_is_one_line_not_a_traceback(args, words):
    done = subprocess.run(mgtutor_argv("doctor", *args), capture_output=True, text=True, env=no_gpu_env(), timeout=60)
    assert done.returncode == 2
    assert words in done.stderr and "Traceback" not in done.stderr
