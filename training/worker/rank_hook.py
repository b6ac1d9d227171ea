"""A user's own script, measured from outside: `step` events from any rank that steps a torch optimizer.

The ranks' hook (training/runs/forensics/stackhook/sitecustomize.py) imports this module once the
script has imported torch, and only when `mgtutor run` asked for it (MGTUTOR_INSTRUMENT=1). It adds:

- torch's global optimizer step post hook: a step is one `step()` of the first optimizer that steps
  (a second optimizer, a GAN's, is not counted again); a script that never steps one writes no events;
- a timer around `_BaseDataLoaderIter.__next__` (the class every DataLoader iterator inherits it from):
  the time spent waiting for the next batch, and its size (the first dim of the first tensor in it);
  what it yields is returned as is, and the iterator stays the DataLoader's own object;
- `torch.Tensor.backward` wrapped: a 0-dim tensor's backward keeps that tensor (detached, no copy,
  no `.item()`) as the loss of the step.

No host-device synchronisation per step. A step costs a few host-side Python operations; values are read
only at log points: step 1 (the time to the first step is the first thing a user asks), then a step that
is a multiple of 10 at least a second after the last log point (so ranks in lockstep log the same step
numbers, which the events' checks compare, and a fast loop writes about one event a second), and any
step 10 s or more after the last one (a slow loop still shows progress). On a GPU the loss is copied to
pinned host memory without blocking at the log point and read at the next one, as the trainer does
(training/worker/trainer/loop.py `send_to_host`): the device's queue never drains for a log line. Peak memory is
the caching allocator's counter (host-side), read only if the script initialised CUDA itself. At exit
the last, partial window is written (its loss only if it has landed: never a wait on a device that may
be what failed).

The hook never breaks the script: every failure inside it is caught, written once to stderr as one
line, and turns the instrumentation off; the script's own calls (its optimizer's step, its DataLoader,
its backward) run and raise exactly as without it.

Under `mgtutor fit` (MGTUTOR_STOP_AFTER_STEPS=K) a trial also ends the script after K optimizer steps, on
purpose: training/worker/batch/fit_trial.py says how, and what its last event carries.
"""
from __future__ import annotations

import atexit
import os
import resource
import sys
import time
import weakref
from collections.abc import Callable
from typing import Any

import torch

from mgtutor.training.runs.events.writer import EVENTS_ENV, EventWriter
from mgtutor.training.runs.batchfit import STOP_ENV

ORIGIN = "hook"
LOG_EVERY = 10  # steps: log points fall on multiples of it, so ranks in lockstep log the same steps
MIN_INTERVAL_S = 1.0  # at most about one event a second from a fast loop
MAX_INTERVAL_S = 10.0  # a slow loop still logs at least this often (a step that takes longer: every step)
_MIB = 1 << 20


def _say_once(exc: BaseException) -> None:
    global _FAILED
    if not _FAILED:
        _FAILED = True
        try:
            text = f"{type(exc).__name__}: {exc}".replace("\n", " ")[:300]
            print(f"mgtutor: instrumentation off ({text})", file=sys.stderr, flush=True)
        except Exception:
            pass


_FAILED = False


def batch_size(batch: Any, depth: int = 0) -> int | None:
    """The first dim of the first tensor in a batch (a tensor, a list or tuple, a dict's values); None
    where there is none. Shape is host-side metadata: no sync."""
    if isinstance(batch, torch.Tensor):
        return int(batch.shape[0]) if batch.dim() > 0 else None
    if depth > 3:
        return None
    if isinstance(batch, dict):
        batch = list(batch.values())
    if isinstance(batch, (list, tuple)):
        for item in batch[:8]:
            found = batch_size(item, depth + 1)
            if found is not None:
                return found
    return None


def _rss_peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / _MIB  # ru_maxrss is in KiB on Linux


class Window:
    """One log window's numbers; its loss may still be on its way to the host (GPU)."""

    def __init__(self, step: int, steps: int, seconds: float, wait: float, samples: int | None,
                 peak: float | None, lr: float | None, loss: torch.Tensor | None, landed: Any) -> None:
        self.step, self.steps, self.seconds, self.wait, self.samples = step, steps, seconds, wait, samples
        self.peak, self.lr, self.loss, self.landed = peak, lr, loss, landed


class StepMeter:
    """Counts steps, times data and steps, keeps the last scalar loss; writes `step` events at log points."""

    def __init__(self, emit: Callable[..., None], clock: Callable[[], float] = time.perf_counter) -> None:
        self.emit = emit
        self.clock = clock
        self.step = 0
        self.optimizer: weakref.ReferenceType[Any] | None = None
        self.window_start: float | None = None  # the last log point, or the first activity seen
        self.window_steps = 0
        self.wait = 0.0
        self.samples = 0
        self.sized = True  # every batch of the window had a size
        self.loss: torch.Tensor | None = None
        self.pending: Window | None = None
        self.last_log = -1.0
        self.last_step_at = 0.0
        self.batch: int | None = None  # the size of the last batch the DataLoader gave
        self.closing: dict[str, Any] = {}  # fields of the last event (a fit trial's memory and budget)
        self.undo: list[Callable[[], None]] = []  # what `uninstall` puts back

    # ---- what the wrappers call -----------------------------------------------------------------
    def began(self, now: float) -> None:
        if self.window_start is None:
            self.window_start = now

    def fetched(self, batch: Any, seconds: float, started: float) -> None:
        self.began(started)
        self.wait += seconds
        size = batch_size(batch)
        if size is None:
            self.sized = False
        else:
            self.samples += size
            self.batch = size

    def backward(self, tensor: torch.Tensor) -> None:
        if tensor.dim() == 0:
            self.began(self.clock())
            self.loss = tensor.detach()

    def stepped(self, optimizer: Any) -> None:
        mine = self.optimizer() if self.optimizer is not None else None
        if mine is None:
            self.optimizer = weakref.ref(optimizer)
        elif mine is not optimizer:
            return  # one optimizer counts the steps
        now = self.clock()
        self.began(now)
        self.last_step_at = now
        self.step += 1
        self.window_steps += 1
        since = now - self.last_log if self.last_log >= 0 else None
        if (self.step == 1 or since is None or since >= MAX_INTERVAL_S
                or (self.step % LOG_EVERY == 0 and since >= MIN_INTERVAL_S)):
            self.log(now, optimizer)

    # ---- log points ----------------------------------------------------------------------------
    def log(self, now: float, optimizer: Any = None) -> None:
        """Close the window: take its numbers now; report it now on a CPU, at the next log point on a GPU."""
        if self.window_steps == 0:
            return
        start = self.window_start if self.window_start is not None else now
        lr = None
        try:
            lr = float(optimizer.param_groups[0]["lr"]) if optimizer is not None else None
        except (AttributeError, IndexError, KeyError, TypeError, ValueError):
            pass
        loss, landed = self._send_to_host(self.loss)
        window = Window(self.step, self.window_steps, now - start, self.wait,
                        self.samples if self.sized and self.samples else None, self._peak_mib(), lr, loss, landed)
        self.window_start, self.window_steps, self.wait, self.samples, self.sized = now, 0, 0.0, 0, True
        self.last_log = now
        self.report_pending(wait=True)
        if landed is None:
            self.report(window)
        else:
            self.pending = window

    def finish(self) -> None:
        """At exit: the partial window (up to its last step, not the script's teardown), and a pending
        loss only if it has landed."""
        self.log(self.last_step_at, self.optimizer() if self.optimizer is not None else None)
        self.report_pending(wait=False)

    def report_pending(self, wait: bool) -> None:
        window = self.pending
        if window is None:
            return
        if window.landed is not None and not wait and not window.landed.query():
            window.loss = None  # not on the host yet, and the device may be what failed: no loss
        elif window.landed is not None:
            window.landed.synchronize()  # normally long done: the steps after it stay queued
        self.pending = None
        self.report(window)

    def report(self, w: Window) -> None:
        per_step = w.seconds / w.steps
        wait = w.wait / w.steps
        fields: dict[str, Any] = {"step": w.step, "origin": ORIGIN, "step_s": round(per_step, 6),
                                  "data_wait_s": round(wait, 6), "compute_s": round(max(per_step - wait, 0.0), 6)}
        if w.samples is not None and w.seconds > 0:
            fields["samples_per_s"] = round(w.samples / w.seconds, 2)
        if w.loss is not None:
            fields["loss"] = float(w.loss.item())  # on the host already: the copy landed, or a CPU tensor
        if w.peak is not None:
            fields["mem_peak_mib"] = round(w.peak, 1)
        if w.lr is not None:
            fields["lr"] = w.lr
        if self.batch is not None:
            fields["batch"] = self.batch  # the per-rank batch: with the peak, what an OOM's diagnosis fits
        fields.update(self.closing)
        self.emit("step", **fields)

    @staticmethod
    def _send_to_host(loss: torch.Tensor | None) -> tuple[torch.Tensor | None, Any]:
        if loss is None or loss.device.type != "cuda":
            return loss, None
        host = torch.empty(loss.shape, dtype=loss.dtype, pin_memory=True)
        host.copy_(loss, non_blocking=True)
        mark = torch.cuda.Event()
        mark.record()
        return host, mark

    @staticmethod
    def _peak_mib() -> float | None:
        if torch.cuda.is_initialized():  # never initialise CUDA ourselves (is_available() may)
            return torch.cuda.max_memory_allocated() / _MIB
        return _rss_peak_mib()  # a CPU rank: the process's peak RSS, as the trainer reports it


def _guarded(meter: StepMeter, name: str) -> Callable[..., None]:
    """meter.<name>, with every failure swallowed (said once) and the meter off after it."""
    method = getattr(meter, name)

    def call(*args: Any) -> None:
        if _FAILED:
            return
        try:
            method(*args)
        except Exception as exc:
            _say_once(exc)

    return call


def wrap_backward(meter: StepMeter) -> None:
    original = torch.Tensor.backward
    seen = _guarded(meter, "backward")

    def backward(self: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        seen(self)
        return original(self, *args, **kwargs)

    backward.__wrapped__ = original  # type: ignore[attr-defined]
    backward.__doc__ = original.__doc__
    torch.Tensor.backward = backward  # type: ignore[method-assign]
    meter.undo.append(lambda: setattr(torch.Tensor, "backward", original))


def wrap_data(meter: StepMeter) -> bool:
    from torch.utils.data import dataloader

    base = getattr(dataloader, "_BaseDataLoaderIter", None)
    if base is None or not callable(getattr(base, "__next__", None)):
        return False
    original = base.__next__
    fetched = _guarded(meter, "fetched")
    clock = meter.clock

    def __next__(self: Any) -> Any:
        began = clock()
        batch = original(self)  # StopIteration and the loader's own errors pass through untouched
        fetched(batch, clock() - began, began)
        return batch

    __next__.__wrapped__ = original  # type: ignore[attr-defined]
    base.__next__ = __next__
    meter.undo.append(lambda: setattr(base, "__next__", original))
    return True


def install(writer: EventWriter | None = None) -> StepMeter | None:
    """Hook this process's torch; None where there is nothing to write to (no run record)."""
    if writer is None:
        if not os.environ.get(EVENTS_ENV):
            return None
        writer = EventWriter.from_env(int(os.environ.get("RANK", "0")))
    meter = StepMeter(writer.emit)
    stepped = _guarded(meter, "stepped")
    from torch.optim.optimizer import register_optimizer_step_post_hook

    handle = register_optimizer_step_post_hook(lambda opt, args, kwargs: stepped(opt))
    meter.undo.append(handle.remove)
    wrap_backward(meter)
    wrap_data(meter)
    finish = _guarded(meter, "finish")
    atexit.register(finish)
    meter.undo.append(lambda: atexit.unregister(finish))
    if os.environ.get(STOP_ENV):  # a trial of `mgtutor fit`
        from mgtutor.training.worker.batch.fit_trial import arm

        arm(meter, writer.emit)
    return meter


def uninstall(meter: StepMeter) -> None:
    """Put torch back as it was (the tests, which hook their own process)."""
    while meter.undo:
        meter.undo.pop()()
