"""The Monitor checks the user's script (`mgtutor check`'s engine) beside the run: the findings of a
script without a DistributedSampler are shown in the folded panel, and the run is not held up. The run's ranks
start through the stand-in torchrun (a script launched from the form on the real torchrun:
tests/test_monitor_live.py::test_builtin_trainer_runs_to_finished_from_the_form)."""
from __future__ import annotations

import pytest

from mgtutor.tui.widgets.check_panel import CheckPanel
from tests.helpers import wait_for_app
from tests.monitor_helpers import make_app
from tests.test_monitor_live import SIZE, launch_from_form, open_form

pytestmark = pytest.mark.slow

# Reads like a DDP script (so the checker has evidence) but, run as is, only prints: no torch import.
NO_SAMPLER = '''import os


def train():
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.utils.data import DataLoader, TensorDataset
    dist.init_process_group("gloo")
    data = TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
    loader = DataLoader(data, batch_size=8, shuffle=True)
    model = DDP(torch.nn.Linear(4, 1))
    for x, y in loader:
        model(x).sum().backward()


if __name__ == "__main__" and os.environ.get("TRAIN_FOR_REAL"):
    train()
print("rank", os.environ.get("RANK"), "done")
'''


@pytest.fixture(autouse=True)
def no_nvml(monkeypatch):
    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")


@pytest.mark.integration
async def test_script_without_sampler_shows_the_finding_beside_the_run(write_script, standin_torchrun):
    script = write_script("no_sampler.py", NO_SAMPLER)
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        screen, form = await open_form(pilot, kind="script", script=str(script), nproc="2", backend="gloo")
        await launch_from_form(pilot, form)
        panel = screen.query_one(CheckPanel)
        await wait_for_app(pilot, lambda: bool(panel.findings) and screen.state is not None and screen.state.done,
                           120, what="the check and the run")
        assert screen.state.phase == "finished"  # the error-level finding did not stop the launch
        sampler = [f for f in panel.findings if f["rule"] == "ddp-no-sampler"]
        assert sampler and sampler[0]["severity"] == "error" and sampler[0]["line"] == 11
        assert panel.has_class("-visible") and panel.collapsed
        assert "1 error" in panel.title
        assert f"{script}:11" in panel.plain and "DistributedSampler" in panel.plain and "fix:" in panel.plain
        screen.query_one("#rank-log").focus()
        await pilot.press("k")
        await pilot.pause()
        assert not panel.collapsed
        await pilot.press("N")  # a new run: the panel belongs to the old one
        await pilot.pause()
        assert not panel.has_class("-visible")


def test_only_a_script_of_the_users_own_is_checked(tmp_path):
    from mgtutor.training.runs.launch.launcher import LaunchSpec
    from mgtutor.tui.screens.monitor import script_of

    assert script_of(LaunchSpec(target=["-m", "mgtutor.training.worker.train", "--steps", "3"])) is None
    assert script_of(LaunchSpec(target=["train.py", "--epochs", "1"], cwd=str(tmp_path))) == str(tmp_path / "train.py")
    assert script_of(LaunchSpec(target=["/abs/train.py"], cwd=str(tmp_path))) == "/abs/train.py"


@pytest.mark.integration
async def test_unreadable_script_gets_a_message_not_a_crash():
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        screen, form = await open_form(pilot, kind="script", script="no/such/script.py", nproc="2", backend="gloo")
        await launch_from_form(pilot, form)
        panel = screen.query_one(CheckPanel)
        await wait_for_app(pilot, lambda: panel.error is not None, 30, what="the check's message")
        assert "no such file" in panel.error and panel.has_class("-visible")
