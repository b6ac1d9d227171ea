"""One trial of `mgtutor fit` inside a rank: the user's script runs unchanged up to its K-th optimizer step
(MGTUTOR_STOP_AFTER_STEPS=K, set by diagnostics/bench/scriptfit.py), then the rank leaves with exit code 0.

The ranks' hook (training/worker/rank_hook.py) arms this when that variable is set. At the K-th step (a
global post hook registered after the meter's, so the step is counted first) the rank:
- writes its last `step` event with `stopped: true`, its batch, and the memory the fit needs: the caching
  allocator's peak reserved bytes (what the GPU had to give, `mem_reserved_peak_mib`) and the budget (the
  free memory plus what this process reserved, `mem_budget_mib`);
- waits for its own device queue (its share of the step's last collective has to run: the other ranks'
  kernels wait for it), flushes its output and leaves with os._exit(0). Why not SystemExit: the script's
  teardown (an NCCL group destroyed while another rank still leaves, DataLoader workers joined) is where
  runs hang, and the trial has measured what it came for.
A rank whose script raises (an OOM: the trial's answer "does not fit") has its traceback printed as Python
would, writes an `error` event (`error`: "cuda_oom" for an out-of-memory) and leaves with os._exit(1) at
once, never waiting on the device or in a teardown; torchrun then ends the other ranks, and `mgtutor fit`
stops the run itself if they linger (a rank blocked in a collective with the one that left).

MGTUTOR_FAKE_CUDA_MEMORY (tests only: the one fake boundary, CUDA) stands in for a GPU on CPU ranks, in the
batch finder's format: {"fixed": B, "per_sample": B, "capacity": {"RANK" or "*": B}}. The peak is fixed +
per_sample × batch, and a backward at a batch whose peak exceeds the capacity raises
torch.cuda.OutOfMemoryError in PyTorch's wording, where the allocator would. Nothing else changes.
"""
from __future__ import annotations

import io
import json
import os
import sys
from collections.abc import Callable
from types import TracebackType
from typing import Any, Protocol

import torch

from mgtutor.training.runs.batchfit import STOP_ENV, TRIAL_BATCH_ENV

FAKE_ENV = "MGTUTOR_FAKE_CUDA_MEMORY"  # the batch finder's stand-in (training/worker/batch/batchfind.py), same format
_MIB = 1 << 20


class StepMeter(Protocol):
    """What a trial asks of the ranks' hook's meter (rank_hook.StepMeter; not imported: it imports this)."""
    step: int
    batch: int | None
    closing: dict[str, Any]
    undo: list[Callable[[], None]]
    clock: Callable[[], float]

    def log(self, now: float, optimizer: Any = None) -> None: ...

    def report_pending(self, wait: bool) -> None: ...


def is_oom(exc: BaseException) -> bool:
    text = str(exc)
    return isinstance(exc, torch.cuda.OutOfMemoryError) or (
        isinstance(exc, RuntimeError) and ("out of memory" in text or "ALLOC_FAILED" in text))


def _gib(size: int) -> str:
    return f"{size / (1 << 30):.2f} GiB"


class FakeCudaMemory:
    """A GPU of `capacity` bytes whose step takes fixed + per_sample × batch (tests on CPU ranks)."""

    def __init__(self, spec: dict[str, Any], rank: int) -> None:
        self.fixed, self.per_sample, self.rank = int(spec["fixed"]), int(spec["per_sample"]), rank
        capacities = spec.get("capacity", {})
        self.capacity = int(capacities.get(str(rank), capacities.get("*", 0)))

    def peak(self, batch: int) -> int:
        return self.fixed + self.per_sample * batch

    def check(self, batch: int) -> None:
        if self.peak(batch) > self.capacity:
            free = max(0, self.capacity - self.fixed)
            raise torch.cuda.OutOfMemoryError(
                f"CUDA out of memory. Tried to allocate {_gib(self.per_sample * batch)}. GPU {self.rank} has a total "
                f"capacity of {_gib(self.capacity)} of which {_gib(free)} is free. (simulated by {FAKE_ENV})")


def memory_fields(fake: FakeCudaMemory | None, batch: int | None) -> dict[str, float]:
    """The peak and the budget of this rank's GPU; nothing on a CPU rank (no device memory to fit)."""
    if fake is not None:
        return {"mem_reserved_peak_mib": round(fake.peak(batch or 0) / _MIB, 1),
                "mem_budget_mib": round(fake.capacity / _MIB, 1)}
    if not torch.cuda.is_initialized():  # the script never used the GPU
        return {}
    free, total = torch.cuda.mem_get_info()
    return {"mem_reserved_peak_mib": round(torch.cuda.max_memory_reserved() / _MIB, 1),
            "mem_budget_mib": round((free + torch.cuda.memory_reserved()) / _MIB, 1),
            "mem_total_mib": round(total / _MIB, 1)}


def leave(code: int, drain: bool) -> None:
    """Flush and end the process now; `drain`: let this rank's queued GPU work finish first."""
    if drain and torch.cuda.is_initialized():
        try:
            torch.cuda.synchronize()
        except Exception:  # a device that failed: leave all the same
            pass
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    os._exit(code)


class TrialStop:
    """Ends the trial: after the K-th optimizer step (exit 0), or at the script's uncaught error (exit 1)."""

    def __init__(self, meter: StepMeter, emit: Callable[..., None], steps: int, fake: FakeCudaMemory | None,
                 exit_now: Callable[[int, bool], None] = leave) -> None:
        self.meter, self.emit, self.steps, self.fake, self.exit_now = meter, emit, steps, fake, exit_now
        self.python_excepthook = sys.excepthook
        self.given_batch = int(os.environ.get(TRIAL_BATCH_ENV, "0") or 0) or None

    def batch(self) -> int | None:
        return self.meter.batch or self.given_batch

    def after_step(self, optimizer: Any, *_args: Any) -> None:
        if self.meter.step < self.steps:
            return
        try:
            self.meter.closing = {"stopped": True, **memory_fields(self.fake, self.batch())}
            if self.batch() is not None:
                self.meter.closing["batch"] = self.batch()
            self.meter.log(self.meter.clock(), optimizer)
            self.meter.report_pending(wait=True)
        except Exception as exc:  # said on stderr; the trial still ends (the parent finds no `stopped` event)
            print(f"mgtutor: fit trial: the last step event failed ({type(exc).__name__}: {exc})", file=sys.stderr)
        self.exit_now(0, True)

    def failed(self, kind: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
        # init_process_group's excepthook calls this one with stderr swapped for a buffer (to prefix each line
        # with the rank) and writes the buffer after it returns: this one does not return, so it writes it
        buffered = sys.stderr if isinstance(sys.stderr, io.StringIO) else None
        self.python_excepthook(kind, value, tb)
        if buffered is not None and sys.__stderr__ is not None:
            sys.__stderr__.write(buffered.getvalue())
        try:
            self.emit("error", error="cuda_oom" if is_oom(value) else "exception", exception=kind.__name__,
                      message=str(value)[:500], step=self.meter.step, batch=self.batch(), phase="fit_trial")
        except Exception:
            pass
        self.exit_now(1, False)

    def before_backward(self) -> None:
        if self.fake is not None:
            self.fake.check(self.batch() or 0)


def wrap_backward_with(check: Callable[[], None], meter: StepMeter) -> None:
    """The fake's OOM, raised inside `backward()` as the allocator would raise it (tests only)."""
    original = torch.Tensor.backward

    def backward(self: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        check()
        return original(self, *args, **kwargs)

    backward.__wrapped__ = original  # type: ignore[attr-defined]
    torch.Tensor.backward = backward  # type: ignore[method-assign]
    meter.undo.append(lambda: setattr(torch.Tensor, "backward", original))


def arm(meter: StepMeter, emit: Callable[..., None]) -> TrialStop | None:
    """Make this rank a trial of `mgtutor fit`; None where MGTUTOR_STOP_AFTER_STEPS is not a count."""
    text = os.environ.get(STOP_ENV, "")
    if not text.isdigit() or int(text) < 1:
        print(f"mgtutor: {STOP_ENV}={text!r} is not a step count; the script runs to its end", file=sys.stderr)
        return None
    fake = FakeCudaMemory(json.loads(os.environ[FAKE_ENV]), int(os.environ.get("RANK", "0"))) \
        if os.environ.get(FAKE_ENV) else None
    trial = TrialStop(meter, emit, int(text), fake)
    from torch.optim.optimizer import register_optimizer_step_post_hook

    handle = register_optimizer_step_post_hook(trial.after_step)
    meter.undo.append(handle.remove)
    sys.excepthook = trial.failed
    meter.undo.append(lambda: setattr(sys, "excepthook", trial.python_excepthook))
    if fake is not None:
        wrap_backward_with(trial.before_backward, meter)
    return trial
