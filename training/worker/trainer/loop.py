"""The training loop of the worker: data, model, steps, timing, checkpoints and step events.

Timing without per-step syncs: a window's numbers are taken every `--log-every` steps, and its
throughput is its samples over its wall time between two log points (on a GPU, between two events
in the device's queue, see `device_mark`). On a GPU the loss only starts
its way to the host there: the window is reported at the next log point, by when it has landed,
so the device never runs dry while the host writes an event and prints (see `send_to_host`).
Data wait is the host time spent getting the next batch (plus, for slow-rank, the injected sleep).
"""
from __future__ import annotations

import argparse
import math
import os
import resource
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from mgtutor.training.foundation.i18n import _, in_language
from mgtutor.training.worker.trainer import inject
from mgtutor.training.worker.trainer.compile_choice import CompilePlan, compile_choice, use_mgtutor_cache
from mgtutor.training.worker.trainer.compiling import CompileWatch, compile_module, is_compile_failure, one_line
from mgtutor.training.worker.trainer.data import (EpochIndices, SyntheticBank, make_sampler, real_dataset, real_loader,
                                          synthetic_bank_size)
from mgtutor.training.runs.events.writer import EventWriter
from mgtutor.training.worker.trainer.models import WithUnusedHead, build_model, params_digest
from mgtutor.training.worker.trainer.steps import (GraphStepper, Stepper, load_checkpoint, make_optimizer, save_checkpoint,
                                    wrap_ddp)

_MIB = 1 << 20


def memory_mib(device: torch.device) -> tuple[float, float]:
    """(allocated now, peak) in MiB: the CUDA caching allocator's view, or the process RSS on a CPU."""
    if device.type == "cuda":
        return torch.cuda.memory_allocated(device) / _MIB, torch.cuda.max_memory_allocated(device) / _MIB
    with open("/proc/self/statm") as handle:
        rss = int(handle.read().split()[1]) * resource.getpagesize()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # ru_maxrss is in KiB on Linux
    return rss / _MIB, max(rss, peak) / _MIB


def process_started() -> float:
    """When this process began (Linux /proc), so a run's time to its first timed step includes
    Python's and torch's start-up; now, where /proc cannot tell."""
    try:
        with open("/proc/self/stat") as handle:
            ticks = int(handle.read().rsplit(")", 1)[1].split()[19])  # field 22: start time since boot
        since_boot = time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
        return time.time() - since_boot
    except (OSError, ValueError, IndexError, AttributeError):
        return time.time()


def send_to_host(loss: torch.Tensor) -> tuple[torch.Tensor, torch.cuda.Event | None]:
    """The loss on its way to the host, and the event that says it landed (None: it is there already).

    On a GPU a copy into pinned memory queued behind the step: `.item()` would block until the whole
    queue drained, and the device would then idle while the host logs. Copying also keeps the value
    safe from the next replay of a CUDA graph, which rewrites its static loss. On a CPU there is
    nothing to wait for."""
    if loss.device.type != "cuda":
        return loss.detach(), None
    host = torch.empty(loss.shape, dtype=loss.dtype, pin_memory=True)
    host.copy_(loss, non_blocking=True)
    return host, device_mark(loss.device)


def device_mark(device: torch.device) -> torch.cuda.Event | None:
    """A timed event at this point of the device's queue (None on a CPU): two of them give a window's
    length on the device's own clock."""
    if device.type != "cuda":
        return None
    mark = torch.cuda.Event(enable_timing=True)
    mark.record()
    return mark


@dataclass
class Window:
    """A log window's numbers, taken at its log point; its loss may still be on its way to the host."""
    step: int
    epoch: int
    steps: int
    host_seconds: float  # from the last log point to this one, on the host's clock
    wait: float
    alloc: float
    peak: float
    lr: float
    loss: torch.Tensor
    landed: torch.cuda.Event | None
    began: torch.cuda.Event | None = None  # the mark where the window began (the last window's `landed`)
    # epochs that ended after this window's log point: their events carry its loss, so they follow it
    epochs_after: list[tuple[int, int, float]] = field(default_factory=list)

    def seconds(self) -> float:
        """How long the window took: on the device's clock where it has both marks (after a sync the
        host queues a window's steps in no time, so its own clock would read that window far too fast,
        and the next one slow), else on the host's."""
        if self.began is not None and self.landed is not None:
            return self.began.elapsed_time(self.landed) / 1000
        return self.host_seconds


class TrainLoop:
    def __init__(self, args: argparse.Namespace, rank: int, world_size: int, device: torch.device,
                 events: EventWriter) -> None:
        self.args, self.rank, self.world_size, self.device, self.events = args, rank, world_size, device, events
        self.started = process_started()
        self.ready_at: float | None = None
        self.targeted = args.inject is not None and rank == args.inject_rank
        self.step = 0
        self.pending: Window | None = None  # logged, not yet reported
        self.window_mark: torch.cuda.Event | None = None  # where the current window began in the device's queue
        self.last_loss: float | None = None  # the loss of the last window reported
        self.used_indices: list[int] = []
        on_gpu = device.type == "cuda"
        self.amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "off": None,
                          "auto": torch.bfloat16 if on_gpu else None}[args.amp]
        self.channels_last = args.channels_last == "on" or (args.channels_last == "auto" and on_gpu)
        if on_gpu:
            torch.backends.cudnn.benchmark = True
        self.replicas = torch.cuda.device_count() if (args.strategy == "dp" and on_gpu) else 1
        self.micro_batch = args.batch_size * self.replicas  # DataParallel splits one batch over the GPUs
        self.per_step = self.micro_batch * args.grad_accum
        self._build_data()
        self._build_model()

    # ---- set-up -------------------------------------------------------------------------------
    def _build_data(self) -> None:
        args = self.args
        distributed = args.strategy == "ddp" and args.inject != "no-sampler"
        if args.data == "synthetic":
            length = args.dataset_size
            bank = synthetic_bank_size(length, self.per_step)
            self.bank = SyntheticBank(args.image_size, self.device, args.seed, bank, self.channels_last)
            self.loader = None
        else:
            dataset = real_dataset(args.data, args.data_dir, args.image_size)
            length = len(dataset)
            self.epoch_sampler = EpochIndices()
            self.loader = real_loader(dataset, self.epoch_sampler, self.micro_batch, args.workers,
                                      pin=self.device.type == "cuda")
        self.sampler = make_sampler(length, self.world_size, self.rank, args.seed, distributed)
        self.steps_per_epoch = len(self.sampler) // self.per_step
        if self.steps_per_epoch < 1:
            raise ValueError(f"an epoch has {len(self.sampler)} samples per rank, fewer than one step "
                             f"({self.per_step}); lower --batch-size or raise --dataset-size")
        self.total_steps = args.steps or args.epochs * self.steps_per_epoch

    def _build_model(self) -> None:
        args = self.args
        torch.manual_seed(args.seed)
        raw: nn.Module = build_model(args.model, image_size=args.image_size)
        if args.inject == "unused-param":
            raw = WithUnusedHead(raw)
        raw = raw.to(self.device)
        if self.channels_last:
            raw = raw.to(memory_format=torch.channels_last)
        base_lr = args.lr * (self.world_size if args.scale_lr == "linear" else 1)
        self.base_lr = base_lr
        self.optimizer = make_optimizer(raw, base_lr, self.device)
        if args.resume:
            state = load_checkpoint(args.checkpoint_dir, self.device)
            raw.load_state_dict(state["model"])
            self.optimizer.load_state_dict(state["optimizer"])
            self.step = int(state["step"])
            self.events.emit("checkpoint", action="resumed", step=self.step, path=args.checkpoint_dir)
        self.raw = raw
        on_gpu, graphs = self.device.type == "cuda", bool(args.cuda_graphs)
        with in_language("en"):  # the result event keeps the English reason
            self.plan: CompilePlan = compile_choice(args, on_gpu, graphs, self.total_steps)
        if self.rank == 0:
            print(_("compile: {why}").format(why=compile_choice(args, on_gpu, graphs, self.total_steps).why), flush=True)
        if self.plan.mode is not None:
            cache = use_mgtutor_cache()
            if self.rank == 0:
                print(_("compile: inductor's cache is {cache}").format(cache=cache), flush=True)
        self.watch: CompileWatch | None = None
        model: nn.Module = raw
        ddp_model: DistributedDataParallel | None = None
        ddp = args.strategy == "ddp"
        if args.cuda_graphs:
            if self.device.type != "cuda":
                raise RuntimeError("--cuda-graphs needs a CUDA device")
            # the graph does DDP's work itself (steps.GraphStepper says why), so no wrapper
            self.uncompiled = raw
            self.stepper: Stepper | GraphStepper = GraphStepper(self._compiled(raw), self.optimizer, self.device,
                                                                self.amp_dtype, distributed=ddp,
                                                                bucket_mb=args.bucket_mb)
            self.warm_steps = self.stepper.warm_steps + 1
            return
        if ddp:
            # static_graph would quietly tolerate the unused layer; the lesson needs DDP's real error.
            # It also breaks no_sync: the reducer asserts (expect_autograd_hooks_) on the synced micro-step.
            static = args.static_graph == "on" and args.inject != "unused-param" and args.grad_accum == 1
            model = ddp_model = wrap_ddp(raw, self.device, static, args.bucket_view == "on", args.bucket_mb)
        elif args.strategy == "dp":
            model = nn.DataParallel(raw)
        self.uncompiled = model
        self.stepper = Stepper(self._compiled(model), self.optimizer, self.device, self.amp_dtype, args.grad_accum,
                               ddp_model)
        # reduce-overhead records its CUDA graphs on the 2nd–3rd call: keep those out of the timing too
        self.warm_steps = 3 if self.plan.mode is not None else 0

    def _compiled(self, model: nn.Module) -> nn.Module:
        return compile_module(model, self.plan) if self.plan.mode is not None else model

    # ---- batches ------------------------------------------------------------------------------
    def epoch_batches(self, epoch: int, skip_steps: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        if hasattr(self.sampler, "set_epoch"):
            self.sampler.set_epoch(epoch)  # without it every epoch repeats the same order
        indices = list(self.sampler)[: self.steps_per_epoch * self.per_step][skip_steps * self.per_step:]
        self.epoch_indices = indices
        if self.loader is None:
            for sel in self.bank.epoch_selections(indices, self.micro_batch):
                yield self.bank.gather(sel, self._graph_inputs())  # in the bank's layout, channels_last or not
            return
        self.epoch_sampler.indices = indices
        for images, labels in self.loader:
            images = images.to(self.device, non_blocking=True)
            if self.channels_last:
                images = images.contiguous(memory_format=torch.channels_last)
            yield images, labels.to(self.device, non_blocking=True)

    def _graph_inputs(self) -> tuple[torch.Tensor, torch.Tensor] | None:
        """A captured graph's static inputs, for a batch to be gathered into (a replay then copies nothing)."""
        if isinstance(self.stepper, GraphStepper) and self.args.grad_accum == 1:
            return self.stepper.static_inputs
        return None

    def lr_at(self, step: int) -> float:
        if self.args.warmup > 0 and step < self.args.warmup:
            return self.base_lr * (step + 1) / self.args.warmup
        return self.base_lr

    # ---- the loop -----------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        args = self.args
        skip = args.timing_skip if args.timing_skip is not None else min(10, self.total_steps // 5)
        skip = max(skip, self.warm_steps)
        start_step = self.step
        timed_from = start_step + skip if start_step + skip < self.total_steps else start_step
        t_timed = time.perf_counter()
        wait_timed = 0.0
        window_start, window_steps, window_wait = time.perf_counter(), 0, 0.0
        self.window_mark = device_mark(self.device)
        loss = None
        while self.step < self.total_steps:
            epoch, in_epoch = divmod(self.step, self.steps_per_epoch)
            epoch_began = time.perf_counter()
            batches = self.epoch_batches(epoch, in_epoch)
            for step_in_epoch in range(in_epoch, self.steps_per_epoch):
                began = time.perf_counter()
                micro = [next(batches) for _ in range(args.grad_accum)]
                if args.inject == "slow-rank" and self.targeted:
                    time.sleep(args.slow_seconds)  # a straggler: the other ranks wait in the all-reduce
                waited = time.perf_counter() - began
                self._maybe_inject(micro)
                if args.warmup:
                    for group in self.optimizer.param_groups:
                        group["lr"] = self.lr_at(self.step)
                loss = self._step(micro)
                if args.record_indices:
                    done = step_in_epoch - in_epoch + 1
                    self.used_indices += self.epoch_indices[(done - 1) * self.per_step: done * self.per_step]
                self.step += 1
                window_steps += 1
                window_wait += waited
                if self.step > timed_from:
                    wait_timed += waited
                if self.step == timed_from:
                    self._sync()
                    t_timed = time.perf_counter()
                    self.ready_at = time.time()
                if self.step % args.log_every == 0 or self.step == self.total_steps:
                    self._log(loss, epoch, window_start, window_steps, window_wait)
                    window_start, window_steps, window_wait = time.perf_counter(), 0, 0.0
                if args.checkpoint_dir and args.checkpoint_every and self.step % args.checkpoint_every == 0:
                    self._report_pending()  # saving waits for the device anyway; the step event comes first
                    self._checkpoint()
                if self.step >= self.total_steps:
                    break
            if self.step % self.steps_per_epoch == 0:
                ended = (epoch, self.step, round(time.perf_counter() - epoch_began, 3))
                if self.pending is None:
                    self._emit_epoch(*ended)
                else:
                    self.pending.epochs_after.append(ended)
        self._sync()
        elapsed = time.perf_counter() - t_timed
        timed_steps = self.step - timed_from
        if args.checkpoint_dir and not (args.checkpoint_every and self.step % args.checkpoint_every == 0):
            self._checkpoint()
        per_step = elapsed / max(timed_steps, 1)
        data_wait = wait_timed / max(timed_steps, 1)
        _alloc, peak = memory_mib(self.device)
        return {
            "samples_per_s": round(timed_steps * self.per_step / elapsed, 2) if elapsed > 0 else 0.0,
            "final_loss": self.last_loss, "steps": self.step, "timed_steps": timed_steps,
            "seconds": round(elapsed, 4), "step_s": round(per_step, 6), "data_wait_s": round(data_wait, 6),
            "compute_s": round(max(per_step - data_wait, 0.0), 6), "mem_peak_mib": round(peak, 1),
            "samples_per_step": self.per_step, "world_size": self.world_size, "strategy": args.strategy,
            "model": args.model, "image_size": args.image_size, "params_sha256": params_digest(self.raw),
            "compile_why": self.plan.why, **(self.watch.as_json() if self.watch else {"compile": self.plan.label}),
            "ready_s": None if self.ready_at is None else round(self.ready_at - self.started, 2),
        }

    def close(self) -> None:
        self.stepper.close()

    def _step(self, micro: list[tuple[torch.Tensor, torch.Tensor]]) -> torch.Tensor:
        """One step; while a compiled step is new, time its compiling and fall back if it fails."""
        if self.plan.mode is None or (self.watch is not None and self.watch.done):
            return self.stepper.step(micro)
        if self.watch is None:
            self.watch = CompileWatch(self.plan)
            self._compile_event("began")
        stepper = self.stepper
        capturing = isinstance(stepper, GraphStepper) and stepper.calls == stepper.warm_steps
        try:
            loss = stepper.step(micro)
        except Exception as exc:
            if not is_compile_failure(exc, capturing):
                raise
            self.watch.fell_back, self.watch.done = one_line(exc), True
            self._compile_event("fell_back", reason=self.watch.fell_back)
            stepper.replace_model(self.uncompiled)
            if self.rank == 0:
                print(self.watch.summary(), flush=True)
            return stepper.step(micro)
        if self.watch.seconds is None:
            self._sync()
            self.watch.compiled()
        if not isinstance(stepper, GraphStepper) or stepper.captured is not None:
            self.watch.done = True
            self._compile_event("compiled", seconds=round(self.watch.seconds or 0.0, 2))
            if self.rank == 0:
                print(self.watch.summary(), flush=True)
        return loss

    def _compile_event(self, phase: str, **fields: Any) -> None:
        self.events.emit("step", kind="compile", phase=phase, plan=self.plan.label, **fields)

    def _sync(self) -> None:
        """Wait for the device; every window logged so far is reported first."""
        self._report_pending()
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def _maybe_inject(self, micro: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
        args = self.args
        if not self.targeted or self.step + 1 != args.inject_step:
            return
        if args.inject == "crash-rank":
            inject.crash(self.rank, self.step + 1)
        elif args.inject == "oom":
            inject.exhaust_memory(self.device)
        elif args.inject == "nan-loss":
            micro[0] = (inject.poison(micro[0][0]), micro[0][1])

    def _log(self, loss: torch.Tensor, epoch: int, window_start: float, steps: int, wait: float) -> None:
        """Close a window: take its numbers now; report it now on a CPU, and at the next log point
        on a GPU, after the window before it, whose loss has landed by then."""
        seconds = time.perf_counter() - window_start
        alloc, peak = memory_mib(self.device)
        host, landed = send_to_host(loss)
        window = Window(self.step, epoch, steps, seconds, wait, alloc, peak, self.lr_at(self.step - 1), host, landed,
                        began=self.window_mark)
        self.window_mark = landed
        self._report_pending()
        if landed is None:
            self._report(window)
        else:
            self.pending = window

    def _report_pending(self) -> None:
        if self.pending is not None:
            window, self.pending = self.pending, None
            if window.landed is not None:
                window.landed.synchronize()  # normally long done: the newer steps stay queued
            self._report(window)

    def report_landed(self) -> None:
        """On a failure: report the pending window if its loss is already on the host; never wait on a
        device that may be what failed."""
        if self.pending is not None and (self.pending.landed is None or self.pending.landed.query()):
            self._report_pending()

    def _report(self, w: Window) -> None:
        value = float(w.loss.item())
        seconds = w.seconds()
        rate = w.steps * self.per_step / seconds if seconds > 0 else 0.0
        per_step = seconds / w.steps
        self.events.emit("step", step=w.step, epoch=w.epoch, loss=value, samples_per_s=round(rate, 2),
                         data_wait_s=round(w.wait / w.steps, 6),
                         compute_s=round(max(per_step - w.wait / w.steps, 0.0), 6),
                         mem_alloc_mib=round(w.alloc, 1), mem_peak_mib=round(w.peak, 1), lr=w.lr)
        if self.rank == 0:
            print(f"step {w.step:>6}/{self.total_steps}  epoch {w.epoch}  loss {value:.4f}  "
                  f"{rate:>10,.0f} samples/s/rank  data wait {100 * w.wait / seconds:>3.0f}%  "
                  f"mem {w.alloc:,.0f}/{w.peak:,.0f} MiB", flush=True)
        if not math.isfinite(value):
            raise FloatingPointError(f"loss is {value} at step {w.step} on rank {self.rank}: the model's "
                                     "weights are now NaN on every rank (the all-reduce spread it)")
        self.last_loss = value
        for ended in w.epochs_after:
            self._emit_epoch(*ended)

    def _emit_epoch(self, epoch: int, steps: int, seconds: float) -> None:
        self.events.emit("epoch", epoch=epoch, steps=steps, loss=self.last_loss, seconds=seconds)

    def _checkpoint(self) -> None:
        if self.rank != 0:
            return
        began = time.perf_counter()
        path = save_checkpoint(self.args.checkpoint_dir, {
            "model": self.raw.state_dict(), "optimizer": self.optimizer.state_dict(), "step": self.step,
            "args": vars(self.args)})
        self.events.emit("checkpoint", action="saved", step=self.step, path=str(path),
                         seconds=round(time.perf_counter() - began, 3))
