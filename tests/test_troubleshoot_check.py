"""Troubleshoot + `mgtutor check`: a symptom shows the findings in the user's own script that explain it."""
from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Input, OptionList, Static

from mgtutor.training.runs.records.types import RunMeta
from mgtutor.diagnostics.failures.symptoms import SYMPTOMS
from mgtutor.training.runs.records.record import RunRecord
from mgtutor.tui.app import MgTutorApp
from mgtutor.tui.screens.troubleshoot import TroubleshootScreen
from tests.helpers import wait_for_app

NO_SAMPLER = """import os
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset

dist.init_process_group("gloo")
model = DDP(torch.nn.Linear(4, 1))
loader = DataLoader(TensorDataset(torch.randn(64, 4), torch.randn(64, 1)), batch_size=8, shuffle=True)
for x, y in loader:
    torch.nn.functional.mse_loss(model(x), y).backward()
"""
BARRIER_ON_RANK0 = """import torch
import torch.distributed as dist

dist.init_process_group("gloo")
if dist.get_rank() == 0:
    torch.save({}, "ckpt.pt")
    dist.barrier()
"""


async def _pick(pilot, screen: TroubleshootScreen, key: str) -> None:
    options = screen.query_one("#ts-symptoms", OptionList)
    options.focus()
    options.highlighted = [o.id for o in options._options].index(key)
    await pilot.press("enter")


async def _give_script(pilot, path: str) -> None:
    await pilot.press("s")
    assert pilot.app.focused is pilot.app.screen.query_one("#ts-script", Input)
    pilot.app.focused.value = path
    await pilot.press("enter")


def _cards(screen) -> list[str]:
    return [str(card.render()) for card in screen.query(".script-card")]


def test_the_four_script_symptoms_are_offered() -> None:
    wanted = {s.title: s.script_symptom for s in SYMPTOMS if s.script_symptom}
    assert wanted["Only one GPU busy"] == "one-gpu-busy" and wanted["Ranks see the same data"] == "same-data"
    assert wanted["No speed-up"] == "no-speedup" and wanted["Hangs after a while"] == "hang"


@pytest.mark.integration
async def test_same_data_shows_the_missing_sampler_in_the_users_script(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")
    script = tmp_path / "train_ddp.py"
    script.write_text(NO_SAMPLER)
    RunRecord.create("train_ddp.py").write_meta(RunMeta.from_json({"target": ["train_ddp.py", "--epochs", "2"], "cwd": str(tmp_path)}))
    # a newer run of a module (ids sort by time, then label): skipped, it has no script to read
    RunRecord.create("zz-module").write_meta(RunMeta.from_json({"target": ["-m", "mgtutor.training.worker.train"], "cwd": "/"}))
    app = MgTutorApp()
    async with app.run_test(size=(100, 40)) as pilot:
        await pilot.press("t")
        screen = app.screen
        assert isinstance(screen, TroubleshootScreen)
        await _pick(pilot, screen, "same-data")
        assert "give your training script" in str(screen.query_one(".script-heading", Static).render())
        field = screen.query_one("#ts-script", Input)
        await wait_for_app(pilot, lambda: field.value == str(script))  # offered from the newest run that had a script
        await pilot.press("s", "enter")
        await wait_for_app(pilot, lambda: bool(screen.script_findings))
        assert [f.rule for f in screen.script_findings] == ["ddp-no-sampler"]
        card = _cards(screen)[0]
        assert "ddp-no-sampler" in card and "train_ddp.py:9" in card and "loader = DataLoader(" in card
        assert "DistributedSampler" in card and "05-distributed-sampler" in card

        # the same script, another symptom: its own findings (or none), never the previous ones
        await _pick(pilot, screen, "hang-later")
        await wait_for_app(pilot, lambda: "ddp-no-sampler" not in " ".join(_cards(screen)) and
                           "reading" not in str(screen.query_one(".script-heading", Static).render()))
        assert all(f.rule != "ddp-no-sampler" for f in screen.script_findings)


async def test_hang_shows_a_barrier_only_rank0_reaches_and_bad_paths_say_why(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")
    script = tmp_path / "ckpt.py"
    script.write_text(BARRIER_ON_RANK0)
    app = MgTutorApp()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("t")
        screen = app.screen
        await _pick(pilot, screen, "hang-later")
        await _give_script(pilot, str(script))
        await wait_for_app(pilot, lambda: bool(screen.script_findings))
        assert "collective-in-rank-branch" in {f.rule for f in screen.script_findings}
        assert any("ckpt.py:7" in card and "dist.barrier()" in card for card in _cards(screen))

        await _give_script(pilot, str(tmp_path / "missing.py"))
        await wait_for_app(pilot, lambda: "cannot check" in str(screen.query_one(".script-heading", Static).render()))
        assert screen.script_findings == [] and not _cards(screen)
