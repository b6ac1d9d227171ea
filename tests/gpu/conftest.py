"""The GPU suite: runs only with `pytest -m gpu` on a machine with two or more NVIDIA GPUs."""
from __future__ import annotations

import pytest

from mgtutor.diagnostics.nvml import inventory


def pytest_collection_modifyitems(config, items):
    here = str(config.rootpath / "tests" / "gpu")
    for item in items:
        if str(item.fspath).startswith(here):
            item.add_marker(pytest.mark.gpu)


@pytest.fixture(scope="session")
def two_gpus():
    inv = inventory()
    if len(inv.gpus) < 2:
        pytest.skip(f"needs 2 NVIDIA GPUs; found {len(inv.gpus)} ({inv.error})")
    return inv
