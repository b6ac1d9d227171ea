"""Shared fixtures: every test gets its own XDG state/data/config homes, so runs and progress never
touch the user's files and tests never see each other's runs."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def xdg_homes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("XDG_STATE_HOME", "XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME"):
        path = tmp_path / name.lower()
        path.mkdir()
        monkeypatch.setenv(name, str(path))
    return tmp_path


@pytest.fixture
def write_script(tmp_path: Path):
    """Write a small Python script into the test's folder and return its path."""

    def write(name: str, text: str) -> Path:
        path = tmp_path / name
        path.write_text(text)
        return path

    return write


def mgtutor_argv(*args: str) -> list[str]:
    """The CLI as a subprocess, through the installed package (no PATH lookup)."""
    return [sys.executable, "-m", "mgtutor.tui", *args]


def no_gpu_env() -> dict[str, str]:
    return dict(os.environ, MGTUTOR_NO_NVML="1")


def pytest_collection_modifyitems(config, items):
    """Everything under tests/gpu/ is the GPU suite: `pytest -m gpu` on a machine with 2+ NVIDIA GPUs."""
    gpu_dir = str(REPO / "tests" / "gpu")
    for item in items:
        if str(item.fspath).startswith(gpu_dir):
            item.add_marker(pytest.mark.gpu)


@pytest.fixture(scope="session")
def two_gpus():
    from mgtutor.training.runs.nvml import inventory

    inv = inventory()
    if len(inv.gpus) < 2:
        pytest.skip(f"needs 2 NVIDIA GPUs; found {len(inv.gpus)} ({inv.error})")
    return inv
