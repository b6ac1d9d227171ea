"""The batch finder inside the ranks: every rank runs the trainer's own step at a batch, and the ranks
agree through the process group on whether it fit (it must fit on all of them) and on the largest peak.

An OOM is caught where it happens, inside the rank's own step, and becomes "did not fit" in the
agreement that every rank reaches anyway; no collective runs inside a trial, so a rank that runs
out of memory can never leave another waiting in one. The agreement uses a gloo group (CPU
tensors, no GPU memory needed right after an OOM), whatever backend the training uses.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import socket
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist

from mgtutor.training.runs.batchfit import CONFIRM_STEP, Confirm, Line, SMALL_BATCH, Trial, chosen_batch, fit_line
from mgtutor.training.worker.trainer.data import SyntheticBank, synthetic_bank_size
from mgtutor.training.worker.trainer.models import build_model
from mgtutor.training.worker.trainer.steps import Stepper, make_optimizer

FAKE_ENV = "MGTUTOR_FAKE_CUDA_MEMORY"  # tests: {"fixed": B, "per_sample": B, "capacity": {"RANK": B}}
TRIAL_STEPS = 2  # the second step holds weights, gradients, optimizer state and activations at once
MAX_TRIALS = 30
MAX_REFITS = 3  # secant steps: refit the line through the two largest fits and aim at its prediction


class TrialOOM(Exception):
    """The fake's out-of-memory, raised where the real allocator would raise torch.OutOfMemoryError."""


def is_oom(exc: BaseException) -> bool:
    text = str(exc)
    return isinstance(exc, (torch.OutOfMemoryError, TrialOOM)) or (
        isinstance(exc, RuntimeError) and ("out of memory" in text or "ALLOC_FAILED" in text))


class CudaMemory:
    """The CUDA caching allocator: peak reserved bytes (what the GPU must give) and what is left."""

    def __init__(self, device: torch.device) -> None:
        self.device = device

    def begin(self, batch: int) -> None:
        torch.cuda.synchronize(self.device)
        torch.cuda.reset_peak_memory_stats(self.device)

    def peak(self, batch: int) -> int:
        torch.cuda.synchronize(self.device)
        return int(torch.cuda.max_memory_reserved(self.device))

    def fixed_guess(self) -> int:
        """Weights (all this process holds before the first step), and as much again for their gradients
        and for momentum."""
        return 3 * int(torch.cuda.memory_allocated(self.device))

    def budget(self, sharing: int) -> int:
        """Free memory plus what this process already reserved, split among ranks on the same GPU."""
        free, _total = torch.cuda.mem_get_info(self.device)
        return int((free + sharing * torch.cuda.memory_reserved(self.device)) // sharing)

    def share(self, sharing: int) -> None:
        """Ranks on one GPU each keep to their share, in the search and in the training after it: cuDNN's
        autotuner (on in training) tries workspaces as large as the memory free at that moment, and
        without a cap one rank's tries take what the other rank's step needs (measured: the chosen batch
        of two ranks on one H200 ran out of memory in its proof). Over the cap an allocation fails in
        this process only, where the autotuner skips the algorithm."""
        if sharing > 1:
            torch.cuda.set_per_process_memory_fraction(1 / sharing, self.device)

    def release(self) -> None:
        gc.collect()
        torch.cuda.empty_cache()


class FakeMemory:
    """A stand-in at the CUDA boundary for CPU tests: a straight memory line and a per-rank capacity."""

    def __init__(self, spec: dict, rank: int) -> None:
        self.fixed, self.per_sample = int(spec["fixed"]), int(spec["per_sample"])
        self.capacity = int(spec["capacity"].get(str(rank), spec["capacity"].get("*", 0)))
        # {"batch": K, "per_sample": P}: above batch K each sample costs P (real steps cost less per sample
        # at large batches than at the small ones the line is first fitted to)
        self.knee = spec.get("knee")

    def _bytes(self, batch: int) -> int:
        if self.knee and batch > self.knee["batch"]:
            return self._bytes(self.knee["batch"]) + int(self.knee["per_sample"]) * (batch - self.knee["batch"])
        return self.fixed + self.per_sample * batch

    def begin(self, batch: int) -> None:
        if self._bytes(batch) > self.capacity:
            raise TrialOOM(f"CUDA out of memory (fake). Tried to allocate {self.per_sample * batch} bytes")

    def peak(self, batch: int) -> int:
        return self._bytes(batch)

    def fixed_guess(self) -> int:
        return self.fixed

    def budget(self, sharing: int) -> int:
        return self.capacity

    def share(self, sharing: int) -> None:
        """The fake's capacity already is this rank's own."""

    def release(self) -> None:
        gc.collect()


def memory_for(device: torch.device, rank: int) -> CudaMemory | FakeMemory:
    if os.environ.get(FAKE_ENV):
        return FakeMemory(json.loads(os.environ[FAKE_ENV]), rank)
    if device.type != "cuda":
        raise RuntimeError("the batch finder measures GPU memory and this rank has no GPU; give a number "
                           "with --batch-size B on CPU ranks")
    return CudaMemory(device)


class TrialStep:
    """The trainer's step (model, fused SGD, autocast, channels_last, synthetic bank) at any batch;
    the model and optimizer are built once, as they are the fixed part of every trial."""

    def __init__(self, args: argparse.Namespace, device: torch.device) -> None:
        self.args, self.device = args, device
        on_gpu = device.type == "cuda"
        amp = {"bf16": torch.bfloat16, "fp16": torch.float16, "off": None,
               "auto": torch.bfloat16 if on_gpu else None}[args.amp]
        self.channels_last = args.channels_last == "on" or (args.channels_last == "auto" and on_gpu)
        # cuDNN's autotuner would time every convolution again at each new batch (about 9 s a trial for
        # ResNet-50 on an H200) and its workspace tries fill the allocator's peak, hiding the step's
        # own memory: trials use cuDNN's heuristic choice, and the proof trains as the trainer does
        torch.backends.cudnn.benchmark = False
        torch.manual_seed(args.seed)
        model = build_model(args.model, image_size=args.image_size).to(device)
        if self.channels_last:
            model = model.to(memory_format=torch.channels_last)
        self.optimizer = make_optimizer(model, args.lr, device)
        self.stepper = Stepper(model, self.optimizer, device, amp, 1, None)

    def run(self, batch: int, steps: int) -> float:
        """`steps` optimizer steps at `batch`; returns the last loss (a device sync)."""
        bank = SyntheticBank(self.args.image_size, self.device, self.args.seed,
                             synthetic_bank_size(self.args.dataset_size, batch), self.channels_last)
        loss = torch.zeros(())
        try:
            for _ in range(steps):
                images, labels = bank.gather(next(bank.epoch_selections(list(range(batch)), batch)))
                loss = self.stepper.step([(images, labels)])
            return float(loss.item())
        finally:
            self.optimizer.zero_grad(set_to_none=True)


@dataclass
class Search:
    """What the ranks agreed on, trial by trial, and the numbers the result reports."""
    trials: list[Trial] = field(default_factory=list)
    line: Line | None = None
    budget_bytes: int = 0
    predicted: int = 0
    predictions: list[int] = field(default_factory=list)  # the first prediction, then each refit's
    measured_max: int = 0
    chosen: int = 0
    seconds: float = 0.0
    budgets: list[int] = field(default_factory=list)


class BatchFinder:
    def __init__(self, args: argparse.Namespace, rank: int, world_size: int, device: torch.device,
                 group: dist.ProcessGroup | None, say: Callable[[str], None]) -> None:
        self.args, self.rank, self.world_size, self.device, self.group = args, rank, world_size, device, group
        self.memory = memory_for(device, rank)
        self.say = say if rank == 0 else (lambda _text: None)
        self.step = TrialStep(args, device)

    # ---- agreement ----------------------------------------------------------------------------
    def reduce(self, values: list[int], op: Any) -> list[int]:
        if self.world_size == 1:
            return values
        tensor = torch.tensor(values, dtype=torch.int64)
        dist.all_reduce(tensor, op=op, group=self.group)
        return [int(v) for v in tensor.tolist()]

    def _gather(self, value: int) -> list[int]:
        if self.world_size == 1:
            return [value]
        out = [torch.zeros(1, dtype=torch.int64) for _ in range(self.world_size)]
        dist.all_gather(out, torch.tensor([value], dtype=torch.int64), group=self.group)
        return [int(t.item()) for t in out]

    def sharing(self) -> int:
        """How many ranks use this rank's GPU (a second process on GPU 0, or --share-gpu)."""
        key = zlib.crc32(f"{socket.gethostname()} {self.device}".encode())  # hash() differs per process
        return max(1, self._gather(key).count(key))

    # ---- trials -------------------------------------------------------------------------------
    def trial(self, search: Search, batch: int, phase: str, steps: int = TRIAL_STEPS) -> tuple[Trial, int]:
        """One trial on every rank: the agreed Trial, and this rank's own peak (its memory line)."""
        began = time.perf_counter()
        fits, peak = True, 0
        try:
            self.memory.begin(batch)
            self.step.run(batch, steps)
            peak = self.memory.peak(batch)
        except Exception as exc:  # an OOM is an answer; anything else is a real error
            if not is_oom(exc):
                raise
            fits = False
        self.memory.release()  # outside the except: the traceback no longer holds the step's tensors
        failed_on = self.reduce([0 if fits else 1 << self.rank], dist.ReduceOp.SUM)[0]  # a bit per rank
        top_peak = self.reduce([peak], dist.ReduceOp.MAX)[0]
        trial = Trial(batch, failed_on == 0, top_peak, time.perf_counter() - began, phase)
        search.trials.append(trial)
        if trial.fits:
            verdict = f"fits on every rank, peak {top_peak / 2**30:.2f} GiB"
        else:
            short = [r for r in range(self.world_size) if failed_on >> r & 1]
            verdict = "out of memory" + ("" if self.world_size == 1 else
                                         f" on rank{'s' if len(short) > 1 else ''} {', '.join(map(str, short))}")
        self.say(f"batch finder: trial {len(search.trials):>2} {phase:<7} batch {batch:>6}  {verdict}  "
                 f"({trial.seconds:.1f} s)")
        return trial, peak

    def find(self) -> Search:
        began = time.perf_counter()
        search = Search()
        sharing = self.sharing()
        self.memory.share(sharing)
        self.memory.release()
        search.budget_bytes = self.memory.budget(sharing)
        search.budgets = self._gather(search.budget_bytes)
        cap = self.args.max_batch or 1 << 40
        points: list[tuple[int, int]] = [(0, self.memory.fixed_guess())]
        trial, peak = self.trial(search, SMALL_BATCH, "fit")
        if not trial.fits:
            raise RuntimeError(f"even batch {SMALL_BATCH} does not fit on every rank: the fixed part (weights, "
                               "gradients, optimizer state) leaves too little memory")
        points.append((SMALL_BATCH, peak))
        search.line = fit_line(points)
        rough = min(self._min(search.line.batch_for(search.budget_bytes)), cap)
        floor_fit = points[-1][0]
        far = max(floor_fit + 1, rough // 4)
        if far < rough:  # a fourth of the way out: the far point sets the slope, not the noise at tiny batches
            trial, peak = self.trial(search, far, "fit")
            if trial.fits:
                points.append((far, peak))
                search.line, floor_fit = fit_line(points[-2:]), far
        search.predicted = min(self._min(search.line.batch_for(search.budget_bytes)), cap)
        self.say(f"batch finder: memory line {search.line.fixed_bytes / 2**30:.2f} GiB fixed + "
                 f"{search.line.per_sample_bytes / 2**20:.2f} MiB per sample; "
                 f"{search.budget_bytes / 2**30:.1f} GiB usable on rank 0 → predicted maximum {search.predicted}")
        # a line too flat to predict (a tiny model whose batch barely shows) starts just above the last fit
        search.predictions = [search.predicted]
        confirm = Confirm(max(search.predicted, floor_fit + 1), cap=self.args.max_batch, floor_fit=floor_fit)
        while (next_batch := confirm.next_batch()) is not None and len(search.trials) < MAX_TRIALS:
            trial, peak = self.trial(search, next_batch, "confirm")
            confirm.record(next_batch, trial.fits)
            if trial.fits and all(t.fits for t in search.trials) and len(search.predictions) <= MAX_REFITS:
                self.refit(search, confirm, points, (next_batch, peak), cap)
        search.measured_max = confirm.best_fit
        search.chosen = min(chosen_batch(search.measured_max, search.line, min(search.budgets),
                                         self.args.margin / 100), search.measured_max)
        search.seconds = time.perf_counter() - began
        return search

    def refit(self, search: Search, confirm: Confirm, points: list[tuple[int, int]], point: tuple[int, int],
              cap: int) -> None:
        """A fit far out measures the step as it is near the edge: the line through it and the last fit
        predicts again (a secant step), and the walk aims there when it is more than a step further."""
        points.append(point)
        line = fit_line(points[-2:])
        again = min(self._min(line.batch_for(search.budget_bytes)), cap)
        if line.per_sample_bytes <= 0 or again <= point[0] * (1 + 2 * CONFIRM_STEP):
            return
        # only for aiming: near the edge cuDNN's workspaces take what is free, so this slope is not the
        # cost of a sample; the first line stays the one reported and the one the margin is counted in
        search.predictions.append(again)
        confirm.aim(again)
        self.say(f"batch finder: memory line refitted at batch {point[0]}: {line.per_sample_bytes / 2**20:.2f} "
                 f"MiB per sample → predicted maximum {again}")

    def _min(self, value: int) -> int:
        return self.reduce([value], dist.ReduceOp.MIN)[0]

    def close(self) -> None:
        del self.step
        self.memory.release()
