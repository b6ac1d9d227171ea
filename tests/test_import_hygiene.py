"""The TUI process never imports torch; the headless core never imports textual or rich."""
from __future__ import annotations

import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest
import mgtutor.diagnostics
import mgtutor.lessons
import mgtutor.training
import mgtutor.tui

pytestmark = pytest.mark.integration  # starts processes

PLAIN_DDP = Path(__file__).parent / "data" / "plain_ddp.py"  # its findings: sampler-no-set-epoch, init-no-timeout
HEADLESS = (mgtutor.training, mgtutor.diagnostics, mgtutor.lessons)


def modules_of(package) -> list[str]:
    return [info.name for info in pkgutil.walk_packages(package.__path__, package.__name__ + ".")]


def imported_after(code: str) -> set[str]:
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    return {name.split(".")[0] for name in json.loads(out.stdout.splitlines()[-1])}


def test_tui_never_imports_torch():
    modules = ["mgtutor.tui.app", "mgtutor.tui.cli", *modules_of(mgtutor.tui)]
    code = "\n".join(f"import {name}" for name in modules if not name.endswith("__main__"))
    assert "torch" not in imported_after(code)


def test_the_app_started_headless_never_imports_torch():
    code = """
import asyncio
from mgtutor.tui.app import MgTutorApp
async def visit():
    app = MgTutorApp()
    async with app.run_test(size=(80, 24)) as pilot:
        for key in "ldmtrh":
            await pilot.press(key)
            await pilot.pause(0.2)
asyncio.run(visit())
"""
    assert "torch" not in imported_after(code)


def test_headless_packages_never_import_textual_or_rich():
    for package in HEADLESS:
        # Worker modules import torch at top level; importing them is fine here (CPU torch is installed).
        code = "\n".join(f"import {name}" for name in modules_of(package))
        leaked = imported_after(code) & {"textual", "rich"}
        assert not leaked, f"{package.__name__} pulls in {leaked}"


def test_the_cli_and_a_check_never_import_libcst():
    """LibCST takes a fifth of a second to import: only applying a fix (`check --fix`, `convert`) needs it."""
    code = ("import mgtutor.tui.cli, mgtutor.tui.commands.run, mgtutor.tui.commands.fit\n"
            "from mgtutor.diagnostics.check.script import check_source\n"
            "found = check_source(open(%r).read())\n"
            "assert found, 'the example has findings'") % str(PLAIN_DDP)
    assert "libcst" not in imported_after(code)
