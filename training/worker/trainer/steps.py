"""One optimizer step, done fast: autocast, fused SGD, DDP's cheap options, and optional CUDA graphs.

Nothing here reads a value back from the device: a `.item()` per step would stall the CPU until
the GPU catches up, and at 32×32 images the CPU launching kernels is what sets the pace.
"""
from __future__ import annotations

import os
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from mgtutor.training.worker.trainer.gradsync import BUCKET_BYTES, BucketAverager, broadcast_from_rank0

Batch = tuple[torch.Tensor, torch.Tensor]


def make_optimizer(model: nn.Module, lr: float, device: torch.device) -> torch.optim.Optimizer:
    """SGD with momentum; the fused CUDA kernel updates every parameter in a few launches."""
    kwargs: dict[str, Any] = dict(lr=lr, momentum=0.9, weight_decay=5e-4)
    if device.type == "cuda":
        try:
            return torch.optim.SGD(model.parameters(), fused=True, **kwargs)
        except (TypeError, RuntimeError):  # torch without fused SGD
            return torch.optim.SGD(model.parameters(), foreach=True, **kwargs)
    return torch.optim.SGD(model.parameters(), **kwargs)


def wrap_ddp(model: nn.Module, device: torch.device, static_graph: bool, bucket_view: bool,
             bucket_mb: float | None = None) -> DistributedDataParallel:
    ids = [device.index] if device.type == "cuda" else None
    # static_graph: the autograd graph is the same every step, so DDP can skip re-discovering it and
    # start all-reduces in a fixed bucket order; gradient_as_bucket_view: grads live inside the
    # all-reduce buckets, saving a copy of every gradient each step.
    extra: dict[str, Any] = {"bucket_cap_mb": bucket_mb} if bucket_mb else {}
    return DistributedDataParallel(model, device_ids=ids, static_graph=static_graph,
                                   gradient_as_bucket_view=bucket_view, **extra)


class Stepper:
    """Eager steps: forward and loss under autocast, backward, optimizer; grad accumulation with no_sync.

    `model` is what runs the forward (DDP, maybe compiled); `ddp` is the DDP wrapper inside it, if any."""

    def __init__(self, model: nn.Module, optimizer: torch.optim.Optimizer, device: torch.device,
                 amp_dtype: torch.dtype | None, accum: int, ddp: DistributedDataParallel | None) -> None:
        self.model, self.optimizer, self.device = model, optimizer, device
        self.amp_dtype, self.accum, self.ddp = amp_dtype, accum, ddp
        self.scaler = torch.amp.GradScaler(device.type) if amp_dtype == torch.float16 else None

    def autocast(self) -> Any:
        if self.amp_dtype is None:
            return nullcontext()
        return torch.autocast(self.device.type, dtype=self.amp_dtype)

    def forward_backward(self, images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        with self.autocast():
            loss = F.cross_entropy(self.model(images), labels) / self.accum
        (self.scaler.scale(loss) if self.scaler else loss).backward()
        return loss.detach()

    def optimizer_step(self) -> None:
        if self.scaler:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()

    def step(self, micro: list[Batch]) -> torch.Tensor:
        total: torch.Tensor | None = None
        for i, (images, labels) in enumerate(micro):
            last = i == len(micro) - 1
            sync = self.ddp.no_sync() if (self.ddp is not None and not last) else nullcontext()
            with sync:
                loss = self.forward_backward(images, labels)
            total = loss if total is None else total + loss
        if total is None:
            raise ValueError("a step needs at least one micro-batch")
        self.optimizer_step()
        self.optimizer.zero_grad(set_to_none=True)
        return total

    def replace_model(self, model: nn.Module) -> None:
        """Run the forward with `model` from now on (a compile that failed falls back to the module it wrapped)."""
        self.model = model
        self.optimizer.zero_grad(set_to_none=True)

    def close(self) -> None:
        pass


@dataclass
class CapturedStep:
    """A captured step: replaying `graph` trains on what `images`/`labels` hold and writes `loss`."""
    graph: torch.cuda.CUDAGraph
    images: torch.Tensor
    labels: torch.Tensor
    loss: torch.Tensor


class GraphStepper:
    """Whole-step CUDA graph: warm up eagerly on a side stream, capture one step, then replay it.

    One replay launches forward, backward, the gradient all-reduce and the optimizer as a single
    graph, so the CPU cost per step no longer grows with the number of kernels. DDP itself cannot be
    captured (torch 2.11: cudaErrorStreamCaptureImplicit, "operation would make the legacy stream
    depend on a capturing blocking stream"), so with several ranks the step does DDP's work by hand:
    broadcast the buffers (BatchNorm statistics) from rank 0, average the gradients in buckets while
    backward runs (training/worker/trainer/gradsync.py), then step the optimizer. Every rank ends each step with the
    same parameters.
    """

    def __init__(self, model: nn.Module, optimizer: torch.optim.Optimizer, device: torch.device,
                 amp_dtype: torch.dtype | None, distributed: bool, bucket_mb: float | None = None,
                 warm_steps: int = 3) -> None:
        self.model, self.optimizer, self.device = model, optimizer, device
        self.amp_dtype, self.warm_steps = amp_dtype, warm_steps
        params = [p for p in model.parameters() if p.requires_grad]
        self.buffers = list(model.buffers())
        self.calls = 0
        self.captured: CapturedStep | None = None
        bucket_bytes = int(bucket_mb * (1 << 20)) if bucket_mb else BUCKET_BYTES
        self.averager = BucketAverager(params, device, bucket_bytes) if distributed else None
        if distributed:
            broadcast_from_rank0(params + self.buffers)  # what DDP's constructor does

    def _body(self, images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        if self.averager:
            broadcast_from_rank0(self.buffers)
            self.averager.start()
        with torch.autocast(self.device.type, dtype=self.amp_dtype, enabled=self.amp_dtype is not None):
            loss = F.cross_entropy(self.model(images), labels)
        loss.backward()
        if self.averager:
            self.averager.finish()
        self.optimizer.step()
        return loss.detach()

    def step(self, micro: list[Batch]) -> torch.Tensor:
        images, labels = micro[0]
        self.calls += 1
        if self.calls <= self.warm_steps:  # eager, on a side stream as capture needs (cuDNN picks, NCCL set-up)
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                self.optimizer.zero_grad(set_to_none=True)
                loss = self._body(images, labels)
            torch.cuda.current_stream().wait_stream(side)
            return loss
        if self.captured is None:
            static_images, static_labels = images.clone(), labels.clone()
            # gradients made during capture live in the graph's memory pool and are rewritten by each replay
            self.optimizer.zero_grad(set_to_none=True)
            graph = torch.cuda.CUDAGraph()
            # thread_local: the NCCL watchdog thread may touch CUDA while this thread captures
            with torch.cuda.graph(graph, capture_error_mode="thread_local"):
                static_loss = self._body(static_images, static_labels)
            self.captured = CapturedStep(graph, static_images, static_labels, static_loss)
        else:  # a batch gathered straight into the static inputs (see static_inputs) is there already
            if images is not self.captured.images:
                self.captured.images.copy_(images, non_blocking=True)
            if labels is not self.captured.labels:
                self.captured.labels.copy_(labels, non_blocking=True)
        self.captured.graph.replay()
        return self.captured.loss

    @property
    def static_inputs(self) -> Batch | None:
        """Where a replay reads its batch from, once captured (None before): a batch written straight
        into them saves the step its copy."""
        return None if self.captured is None else (self.captured.images, self.captured.labels)

    def replace_model(self, model: nn.Module) -> None:
        """Warm up and capture again with `model` (a compile that failed falls back to the module it wrapped);
        the gradient hooks stay those of the same parameters."""
        if self.captured is not None:
            self.captured.graph.reset()
        self.model, self.captured, self.calls = model, None, 0
        self.optimizer.zero_grad(set_to_none=True)

    def close(self) -> None:
        """Free the graph before the process group goes: NCCL cannot tear down a communicator
        while a live graph still holds collectives captured on it (destroy_process_group hangs)."""
        if self.captured is not None:
            torch.cuda.synchronize(self.device)
            self.captured.graph.reset()
            self.captured = None


def save_checkpoint(directory: str, state: dict[str, Any]) -> Path:
    """Write beside the target, then rename over it: a crash mid-save never leaves half a checkpoint."""
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "checkpoint.pt"
    tmp = folder / f".checkpoint.pt.{os.getpid()}.tmp"
    torch.save(state, tmp)
    os.replace(tmp, path)
    return path


def load_checkpoint(directory: str, device: torch.device) -> dict[str, Any]:
    path = Path(directory) / "checkpoint.pt"
    if not path.is_file():
        raise FileNotFoundError(f"--resume: no checkpoint at {path}")
    return torch.load(path, map_location=device, weights_only=False)
