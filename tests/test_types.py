"""The type check ([tool.mypy] in pyproject.toml) as one test of the whole suite: it runs beside the other tests on
a free core instead of after them, and a developer's `pytest` run checks the types too."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.integration
def test_mypy_finds_no_type_errors() -> None:
    # as a developer runs it: without the suite's PYTHONPATH, whose sitecustomize mypy would take for the one the
    # stack hook imports after its own
    env = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}
    checked = subprocess.run([sys.executable, "-m", "mypy"], cwd=REPO, env=env, capture_output=True, text=True,
                             timeout=600)
    assert checked.returncode == 0, checked.stdout[-6000:] + checked.stderr[-2000:]
    assert "Success: no issues found" in checked.stdout
