"""The ranks' hook that measures a user's script (training/worker/rank_hook.py, and the finder in
training/runs/forensics/stackhook/sitecustomize.py that loads it), in this process: no rank is started."""
from __future__ import annotations

import ast
import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from mgtutor.training.runs.events.reader import parse_event
from mgtutor.training.runs.events.types import StepEvent
from mgtutor.training.runs.events.writer import encode
from mgtutor.training.worker import rank_hook
from mgtutor.training.worker.rank_hook import StepMeter, batch_size, install, uninstall

SITECUSTOMIZE = Path(rank_hook.__file__).parents[1] / "runs" / "forensics" / "stackhook" / "sitecustomize.py"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Emitted(list):
    def __call__(self, event_type: str, **fields: Any) -> None:
        self.append((event_type, fields))


class Opt:
    param_groups = [{"lr": 0.1}]


@pytest.fixture(autouse=True)
def hook_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rank_hook, "_FAILED", False)


def test_batch_size_is_the_first_dim_of_the_first_tensor():
    assert batch_size(torch.zeros(8, 3)) == 8
    assert batch_size((torch.zeros(4, 2), torch.zeros(4))) == 4
    assert batch_size({"ids": [1, 2], "x": torch.zeros(5, 1)}) == 5
    assert batch_size(["a", "b"]) is None and batch_size(torch.tensor(1.0)) is None


def test_log_points_are_step_one_then_multiples_of_ten_a_second_apart():
    clock, emitted = Clock(), Emitted()
    meter = StepMeter(emitted, clock)
    opt = Opt()
    for _ in range(250):  # 0.05 s a step: a multiple of 10 at least a second after the last log point
        clock.now += 0.01
        meter.fetched(torch.zeros(8, 2), 0.01, clock.now - 0.01)
        clock.now += 0.04
        meter.backward(torch.tensor(2.0))
        meter.stepped(opt)
    meter.finish()
    steps = [fields["step"] for _, fields in emitted]
    assert steps == [1, 30, 50, 70, 90, 110, 130, 150, 170, 190, 210, 230, 250]
    first, second = emitted[0][1], emitted[1][1]
    assert first["origin"] == "hook" and first["loss"] == 2.0 and first["lr"] == 0.1
    assert second["step_s"] == pytest.approx(0.05) and second["data_wait_s"] == pytest.approx(0.01)
    assert second["compute_s"] == pytest.approx(0.04) and second["samples_per_s"] == pytest.approx(160.0)


def test_a_slow_loop_logs_every_step_after_ten_seconds_and_a_second_optimizer_is_not_counted():
    clock, emitted = Clock(), Emitted()
    meter = StepMeter(emitted, clock)
    opt, other = Opt(), Opt()
    for _ in range(3):
        clock.now += 12.0
        meter.stepped(opt)
        meter.stepped(other)  # a GAN's second optimizer: the same step
    assert [fields["step"] for _, fields in emitted] == [1, 2, 3]
    assert "samples_per_s" not in emitted[1][1] and "loss" not in emitted[1][1]  # no DataLoader, no backward


def test_no_optimizer_step_no_event():
    emitted = Emitted()
    meter = StepMeter(emitted, Clock())
    meter.fetched(torch.zeros(2), 0.1, 100.0)
    meter.backward(torch.tensor(1.0))
    meter.finish()
    assert emitted == []


def test_the_hook_step_event_reads_back_with_its_fields():
    emitted = Emitted()
    meter = StepMeter(emitted, Clock())
    meter.backward(torch.tensor(0.5))
    meter.stepped(Opt())
    kind, fields = emitted[0]
    event = parse_event(encode(kind, 1, **fields).decode())
    assert isinstance(event, StepEvent) and event.origin == "hook" and event.step_s is not None
    assert event.loss == 0.5 and event.extra == {}
    old = parse_event('{"rank":0,"t":1,"type":"step","step":3,"loss":1.0}')  # a trainer's event from before
    assert isinstance(old, StepEvent) and old.origin is None and old.step_s is None


def test_a_real_loop_gets_events_with_item_read_only_at_log_points(monkeypatch: pytest.MonkeyPatch):
    """No per-step host-device sync, structurally: `.item()` runs once per event, not once per step."""
    emitted = Emitted()

    class Writer:
        emit = emitted

    items = {"n": 0}
    real_item = torch.Tensor.item

    def counted(self: torch.Tensor) -> Any:
        items["n"] += 1
        return real_item(self)

    def train() -> int:
        items["n"] = 0
        data = TensorDataset(torch.randn(400, 4), torch.randn(400, 1))
        model = nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        for inputs, target in DataLoader(data, batch_size=4):
            opt.zero_grad()
            nn.functional.mse_loss(model(inputs), target).backward()
            opt.step()
        return items["n"]

    monkeypatch.setattr(torch.Tensor, "item", counted)
    bare = train()  # torch's own reads (the optimizer's, the loader's), without the hook
    meter = install(Writer())  # type: ignore[arg-type]
    assert meter is not None
    try:
        hooked = train()
        meter.finish()
        hooked = items["n"]
    finally:
        uninstall(meter)
    assert not hasattr(torch.Tensor.backward, "__wrapped__")  # put back
    steps = [fields["step"] for _, fields in emitted]
    assert steps[0] == 1 and steps[-1] == 100 and len(steps) < 10
    assert hooked - bare == len(steps)  # one read per event, none per step
    assert all(fields["samples_per_s"] > 0 and "loss" in fields for _, fields in emitted)


def test_a_failure_inside_the_hook_is_said_once_and_never_reaches_the_script(capsys: pytest.CaptureFixture[str]):
    class Broken:
        @staticmethod
        def emit(*args: Any, **kwargs: Any) -> None:
            raise OSError("disk full")

    meter = install(Broken())  # type: ignore[arg-type]
    assert meter is not None
    try:
        model = nn.Linear(2, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(3):
            model(torch.ones(1, 2)).sum().backward()
            opt.step()
    finally:
        uninstall(meter)
    err = capsys.readouterr().err.splitlines()
    assert err == ["mgtutor: instrumentation off (OSError: disk full)"]


def _sitecustomize() -> Any:
    spec = importlib.util.spec_from_file_location("mgtutor_stackhook_under_test", SITECUSTOMIZE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # no RANK, no MGTUTOR_INSTRUMENT here: it installs nothing
    return module


def test_the_finder_acts_after_the_module_ran_then_leaves(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    hook = _sitecustomize()
    (tmp_path / "fake_torch_for_hook.py").write_text("VALUE = 42\n")
    (tmp_path / "fake_torch_broken.py").write_text("raise RuntimeError('no CUDA libraries')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    seen: list[int] = []
    finder = hook._AwaitTorch("fake_torch_for_hook", then=lambda: seen.append(sys.modules["fake_torch_for_hook"].VALUE))
    broken = hook._AwaitTorch("fake_torch_broken", then=lambda: seen.append(-1))
    monkeypatch.setattr(sys, "meta_path", [finder, broken, *sys.meta_path])
    try:
        import fake_torch_for_hook  # type: ignore[import-not-found]

        assert seen == [42] and finder not in sys.meta_path
        assert not isinstance(fake_torch_for_hook.__loader__, hook._ThenMeasure)
        with pytest.raises(RuntimeError):
            import fake_torch_broken  # type: ignore[import-not-found]  # noqa: F401
        assert seen == [42]  # a module that raised: nothing hooked, the error is the script's own
    finally:
        sys.modules.pop("fake_torch_for_hook", None)
        sys.modules.pop("fake_torch_broken", None)


def test_the_hook_file_never_imports_torch_at_start():
    imported = set()
    for node in ast.walk(ast.parse(SITECUSTOMIZE.read_text())):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module.split(".")[0])
    assert "torch" not in imported and "mgtutor" not in imported  # the worker comes by name, once torch is in


def test_the_charts_of_a_finished_run_without_steps_never_wait_for_the_first_step():
    from mgtutor.training.runs.follow.runstate import RankState, RunState
    from mgtutor.tui.widgets.training_charts import no_steps_text

    running = RunState(run_id="r", phase="running", ranks={0: RankState(rank=0)})
    assert no_steps_text(running) == "waiting for the first step..."
    for phase in ("finished", "failed", "stopped", "lost"):
        said = no_steps_text(RunState(run_id="r", phase=phase, ranks={0: RankState(rank=0)}))
        assert said.startswith("no optimizer steps were seen" if phase == "finished" else "the run") and "waiting" not in said
    stepped = RunState(run_id="r", phase="finished", ranks={0: RankState(rank=0, last_step=30)})
    assert no_steps_text(stepped).startswith("step 30: no samples/s or loss")


def test_a_live_stack_file_is_named_only_once_its_signal_handler_is_in_place(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch):
    """A capture signals only a process whose live file exists, and the signal's default action ends the
    process: under load a rank still starting was killed by a capture that came between the two."""
    import faulthandler

    hook = _sitecustomize()
    live = tmp_path / "live"
    monkeypatch.setenv("MGTUTOR_STACKS_LIVE", str(live))
    monkeypatch.setenv("RANK", "0")
    named_at_register: list[bool] = []
    registered: list[int] = []

    def register(signum: int, **kwargs: Any) -> None:
        named_at_register.append((live / f"pid{os.getpid()}.txt").exists())
        registered.append(signum)

    monkeypatch.setattr(faulthandler, "register", register)
    monkeypatch.setattr(faulthandler, "unregister", lambda signum: None)
    hook._install(forked=True)  # forked: no exit handlers, no flight listener in this test process
    hook._HANDLE.close()
    assert named_at_register == [False] and registered
    assert [p.name for p in live.iterdir()] == [f"pid{os.getpid()}.txt"]
    assert (live / f"pid{os.getpid()}.txt").read_text().startswith(f"# pid {os.getpid()} ")
