"""A log point on a GPU does not wait for the steps just queued: the window's loss goes to the host
behind them and the window is reported at the next log point (loop.send_to_host). The lag is
exercised here in a real one-process run on the CPU, with a stand-in for the pinned copy and its
CUDA event at that boundary only: every window is still reported once, in order, with the same
numbers as the synchronous CPU path, and the epochs, the checkpoints and the result say the same."""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import torch

from mgtutor.training.worker.trainer import loop

# 3 steps an epoch (24 samples / 8), log points at 2, 4, 6 and 7: epochs end between log points
RUN = ["--strategy", "single", "--model", "tinycnn", "--batch-size", "8", "--dataset-size", "24",
       "--steps", "7", "--log-every", "2", "--seed", "3"]


class LandedEvent:
    """Stands in for the torch.cuda.Event recorded behind the copy: counts the waits on it."""

    def __init__(self, waits: list[int]) -> None:
        self.waits = waits

    def synchronize(self) -> None:
        self.waits.append(1)

    def query(self) -> bool:
        return True

    def elapsed_time(self, later: "LandedEvent") -> float:
        return 500.0  # ms from this mark to a later one, as the device's clock would say


def lagged(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Make the CPU loop take the GPU's path: the loss copied at the log point, reported later."""
    waits: list[int] = []

    def send(loss: torch.Tensor) -> tuple[torch.Tensor, Any]:
        return loss.detach().clone(), LandedEvent(waits)

    monkeypatch.setattr(loop, "send_to_host", send)
    return waits


def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, *extra: str,
        into: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """One run's events, also put `into` a list given, for a run that raises."""
    from mgtutor.training.worker import train

    path = tmp_path / f"{name}.jsonl"
    monkeypatch.setenv("MGTUTOR_EVENTS", str(path))
    monkeypatch.setenv("MGTUTOR_BACKEND", "gloo")
    events = [] if into is None else into
    try:
        train.main([*RUN, *extra])
    finally:
        events += [json.loads(line) for line in path.read_text().splitlines()]
    return events


def story(events: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """What the record tells, less the wall-clock numbers: steps, losses, epochs, checkpoints."""
    keep = {"step": ("step", "epoch", "loss", "lr"), "epoch": ("epoch", "steps", "loss"),
            "checkpoint": ("action", "step"), "result": ("steps", "final_loss")}
    return [(e["type"], *(e[k] for k in keep[e["type"]])) for e in events if e["type"] in keep]


def test_a_lagged_window_is_reported_once_in_order_with_the_numbers_of_a_synchronous_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    ckpt = ["--checkpoint-dir", str(tmp_path / "ckpt"), "--checkpoint-every", "4"]
    plain = run(tmp_path, monkeypatch, "plain", *ckpt)
    plain_out = capsys.readouterr().out
    waits = lagged(monkeypatch)
    late = run(tmp_path, monkeypatch, "late", *ckpt)
    late_out = capsys.readouterr().out

    assert [e["step"] for e in late if e["type"] == "step"] == [2, 4, 6, 7]
    # the first window began at a host-side start (no mark on a CPU); each later one between two marks,
    # so its length is the device clock's (0.5 s here), not the host's between two log points
    assert [e["samples_per_s"] for e in late if e["type"] == "step"][1:] == [2 * 8 / 0.5, 2 * 8 / 0.5, 1 * 8 / 0.5]
    assert len(waits) == 4  # each window waited on its own copy before it was read
    assert story(late) == story(plain)  # the same order too: step 4 before its checkpoint, epochs after their window
    steps = [e for e in late if e["type"] == "step"]
    result = next(e for e in late if e["type"] == "result")
    assert result["final_loss"] == steps[-1]["loss"] and steps[-1]["step"] == result["steps"] == 7
    epochs = [e for e in late if e["type"] == "epoch"]
    # an epoch carries the loss of the last window logged by its end: steps 2 (epoch 0) and 6 (epoch 1)
    assert [(e["steps"], e["loss"]) for e in epochs] == [(3, steps[0]["loss"]), (6, steps[2]["loss"])]
    printed = re.findall(r"^step +(\d+)/7  epoch (\d)  loss ([\d.]+) ", late_out, re.M)
    assert [step for step, _epoch, _loss in printed] == ["2", "4", "6", "7"]
    assert printed == re.findall(r"^step +(\d+)/7  epoch (\d)  loss ([\d.]+) ", plain_out, re.M)


def test_a_nan_found_a_window_late_still_names_its_step(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lagged(monkeypatch)
    with pytest.raises(FloatingPointError, match=r"loss is nan at step 4 on rank 0"):
        run(tmp_path, monkeypatch, "nan", "--inject", "nan-loss", "--inject-rank", "0", "--inject-step", "3")


def test_a_failure_still_reports_the_window_whose_loss_had_landed(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    lagged(monkeypatch)
    events: list[dict[str, Any]] = []
    with pytest.raises(RuntimeError, match="injected crash"):
        run(tmp_path, monkeypatch, "crash", "--inject", "crash-rank", "--inject-rank", "0", "--inject-step", "5",
            into=events)
    assert [e["step"] for e in events if e["type"] == "step"] == [2, 4]  # 4 was still pending at the crash
