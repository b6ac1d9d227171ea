"""A trial of `mgtutor fit` inside a rank (training/worker/batch/fit_trial.py), in this process: no rank is started, and
the process's exit is handed to the test instead of os._exit. Real trials on real ranks: tests/test_fit_run.py."""
from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from mgtutor.training.worker import rank_hook
from mgtutor.training.worker.batch.fit_trial import FakeCudaMemory, TrialStop, is_oom, wrap_backward_with
from mgtutor.training.worker.rank_hook import StepMeter, install, uninstall

MIB = 1 << 20


class Emitted(list):
    def __call__(self, event_type: str, **fields: Any) -> None:
        self.append((event_type, fields))


class Left(Exception):
    """Where the rank would have left the process (os._exit)."""


@pytest.fixture(autouse=True)
def hook_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rank_hook, "_FAILED", False)


def armed(emitted: Emitted, steps: int, fake: FakeCudaMemory | None) -> tuple[StepMeter, TrialStop, list]:
    """The hook and a trial over it, as `arm` makes them, with the exit recorded instead of taken."""
    class Writer:
        emit = emitted

    meter = install(Writer())  # type: ignore[arg-type]
    assert meter is not None
    exits: list[tuple[int, bool]] = []

    def exit_now(code: int, drain: bool) -> None:
        exits.append((code, drain))
        raise Left

    trial = TrialStop(meter, emitted, steps, fake, exit_now)
    from torch.optim.optimizer import register_optimizer_step_post_hook

    meter.undo.append(register_optimizer_step_post_hook(trial.after_step).remove)
    if fake is not None:
        wrap_backward_with(trial.before_backward, meter)
    return meter, trial, exits


def train(batch: int, steps: int = 10) -> int:
    """A plain loop; returns how many optimizer steps it took before the trial ended it."""
    data = TensorDataset(torch.randn(steps * batch, 4), torch.randn(steps * batch, 1))
    model = nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    taken = 0
    for inputs, target in DataLoader(data, batch_size=batch):
        opt.zero_grad()
        nn.functional.mse_loss(model(inputs), target).backward()
        opt.step()
        taken += 1
    return taken


@pytest.mark.integration
def test_the_trial_ends_the_script_after_its_kth_step_with_the_peak_and_the_budget() -> None:
    emitted = Emitted()
    fake = FakeCudaMemory({"fixed": 100 * MIB, "per_sample": MIB, "capacity": {"*": 200 * MIB}}, rank=0)
    meter, _trial, exits = armed(emitted, 3, fake)
    try:
        with pytest.raises(Left):
            train(batch=16)
    finally:
        uninstall(meter)
    assert exits == [(0, True)] and meter.step == 3  # exit code 0 right after step 3, the device drained first
    kind, last = emitted[-1]
    assert kind == "step" and last["step"] == 3 and last["stopped"] is True and last["batch"] == 16
    assert last["mem_reserved_peak_mib"] == 116.0 and last["mem_budget_mib"] == 200.0


def test_over_the_fakes_capacity_the_backward_raises_pytorchs_oom_and_the_rank_leaves_with_an_error_event(
        capsys: pytest.CaptureFixture[str]) -> None:
    emitted = Emitted()
    fake = FakeCudaMemory({"fixed": 100 * MIB, "per_sample": MIB, "capacity": {"0": 110 * MIB}}, rank=0)
    meter, trial, exits = armed(emitted, 3, fake)
    try:
        with pytest.raises(torch.cuda.OutOfMemoryError) as raised:
            train(batch=16)
        assert is_oom(raised.value) and "CUDA out of memory. Tried to allocate" in str(raised.value)
        with pytest.raises(Left):
            trial.failed(raised.type, raised.value, raised.tb)  # what sys.excepthook gets
    finally:
        uninstall(meter)
    assert exits == [(1, False)]  # at once: no wait on a device that may be what failed
    assert "OutOfMemoryError: CUDA out of memory" in capsys.readouterr().err  # the traceback, as Python prints it
    kind, error = emitted[-1]
    assert kind == "error" and error["error"] == "cuda_oom" and error["batch"] == 16 and error["phase"] == "fit_trial"


@pytest.mark.integration
def test_without_the_fake_a_cpu_rank_reports_no_device_memory() -> None:
    emitted = Emitted()
    meter, _trial, exits = armed(emitted, 2, None)
    try:
        with pytest.raises(Left):
            train(batch=8)
    finally:
        uninstall(meter)
    last = emitted[-1][1]
    assert exits == [(0, True)] and last["stopped"] is True
    assert "mem_reserved_peak_mib" not in last  # mgtutor fit then says there is no device memory to fit
