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
