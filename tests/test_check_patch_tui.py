"""The check panels offer the fixes as a diff: F shows what `mgtutor check --fix` would write into the
user's script, `a` asks, `y` writes it (exactly the CLI's fix), `n` leaves the file as it was."""
from __future__ import annotations

from pathlib import Path

import pytest

from mgtutor.diagnostics.check.fix.apply import fix_file
from mgtutor.diagnostics.check.script import check_file
from mgtutor.tui.app import MgTutorApp
from mgtutor.tui.screens.confirm import ConfirmScreen
from mgtutor.tui.screens.patch import PatchScreen
from mgtutor.tui.screens.troubleshoot import TroubleshootScreen
from mgtutor.tui.widgets.check_panel import CheckPanel
from tests.helpers import wait_for_app
from tests.test_troubleshoot_check import _give_script, _pick

SCRIPT = Path(__file__).parent / "data" / "check" / "cuda-required.bad.py"


@pytest.fixture(autouse=True)
def no_nvml(monkeypatch):
    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")


@pytest.mark.integration
async def test_troubleshoot_shows_the_diff_and_writes_it_after_yes(tmp_path):
    script = tmp_path / "demo.py"
    script.write_text(SCRIPT.read_text())
    expected = fix_file(script).after
    app = MgTutorApp()
    async with app.run_test(size=(100, 40)) as pilot:
        await pilot.press("t")
        screen = app.screen
        assert isinstance(screen, TroubleshootScreen)
        await _pick(pilot, screen, "one-gpu")
        await _give_script(pilot, str(script))
        await wait_for_app(pilot, lambda: bool(screen.script_findings))
        assert "cuda-required" in {f.rule for f in screen.script_findings}
        screen.query_one("#ts-symptoms").focus()
        await pilot.press("F")
        patch = await wait_for_app(pilot, lambda: app.screen if isinstance(app.screen, PatchScreen) else None)
        assert "+    if torch.cuda.is_available():" in patch.plain and "1 safe fix(es) (cuda-required)" in patch.plain
        assert "1 more with `mgtutor check --fix --unsafe-fixes`" in patch.plain
        await pilot.press("a")
        await wait_for_app(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("n")  # not now: nothing written, the diff is still there
        await wait_for_app(pilot, lambda: isinstance(app.screen, PatchScreen))
        assert script.read_text() == SCRIPT.read_text()
        await pilot.press("a")
        await wait_for_app(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await wait_for_app(pilot, lambda: script.read_text() != SCRIPT.read_text(), what="the fix written")
        assert script.read_text() == expected
        await wait_for_app(pilot, lambda: app.screen is screen)
        await wait_for_app(pilot, lambda: "cuda-required" not in {f.rule for f in screen.script_findings})


@pytest.mark.integration
async def test_monitor_check_panel_offers_the_same_diff(tmp_path):
    script = tmp_path / "demo.py"
    script.write_text(SCRIPT.read_text())
    app = MgTutorApp()
    async with app.run_test(size=(100, 40)) as pilot:
        await pilot.press("m")
        screen = app.screen
        panel = screen.query_one(CheckPanel)
        panel.show(str(script), [f.to_json() for f in check_file(script)])  # what the launch's check posts
        assert panel.fixable == 1 and "safe fix: F shows it" in panel.plain
        screen.refresh_bindings()
        await pilot.press("F")
        patch = await wait_for_app(pilot, lambda: app.screen if isinstance(app.screen, PatchScreen) else None)
        assert "-    torch.cuda.set_device(local_rank)" in patch.plain
        await pilot.press("escape")
        await wait_for_app(pilot, lambda: app.screen is screen)
        assert script.read_text() == SCRIPT.read_text()


async def test_troubleshoot_offers_the_patch_for_the_line_a_diagnosis_names(tmp_path):
    """A run that died in the user's torch.cuda.set_device: g diagnoses it, F shows the patch."""
    from mgtutor.training.runs.records.types import RunMeta
    from mgtutor.training.runs.records.record import RunRecord

    script = tmp_path / "demo.py"
    script.write_text(SCRIPT.read_text())
    record = RunRecord.create("demo-py")
    record.write_meta(RunMeta.from_json({"target": ["demo.py"], "cwd": str(tmp_path), "backend": "gloo"}))
    (record.path / "logs" / "rank0.stderr.log").write_text(
        f'Traceback (most recent call last):\n  File "{script}", line 12, in setup\n'
        "    torch.cuda.set_device(local_rank)\nRuntimeError: Found no NVIDIA driver on your system.\n")
    app = MgTutorApp()
    async with app.run_test(size=(100, 40)) as pilot:
        await pilot.press("t")
        screen = app.screen
        await pilot.press("g")
        await wait_for_app(pilot, lambda: bool(screen.findings))
        assert screen.findings[0].script_frame["line"] == 12
        await pilot.press("F")
        patch = await wait_for_app(pilot, lambda: app.screen if isinstance(app.screen, PatchScreen) else None)
        assert "+    if torch.cuda.is_available():" in patch.plain
