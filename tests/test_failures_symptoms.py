"""Troubleshoot's machine checks, answered from a faked NVML (the boundary) and this machine's real network."""
from __future__ import annotations

import pytest
from fake_nvml import install, two_h200

from mgtutor.diagnostics.failures.symptoms import SYMPTOMS, check_addr_resolves, check_gpus, run_checks


def test_gpus_check_names_the_gpus_it_sees(monkeypatch: pytest.MonkeyPatch) -> None:
    install(monkeypatch, two_h200())
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    check = check_gpus()
    assert check.ok is True
    assert check.text.startswith("2× NVIDIA H200") and check.text.endswith("; CUDA_VISIBLE_DEVICES=0,1")


def test_every_check_of_one_gpu_symptom_runs_with_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    install(monkeypatch, two_h200())
    one_gpu = next(s for s in SYMPTOMS if s.key == "one-gpu")
    assert not [c for c in run_checks(one_gpu) if c.text.startswith("could not check")]


def test_master_addr_resolves_to_addresses(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    check = check_addr_resolves()
    assert check.ok is True and check.text == "127.0.0.1 → 127.0.0.1"
