"""What DDP does for a step, done by hand so that it can live inside a CUDA graph.

DDP's own autograd hooks cannot be captured (steps.GraphStepper says why). `BucketAverager` does
the same job the same way: a hook on every parameter notes when its gradient is ready; once all
gradients of a bucket are, the bucket's all-reduce starts on a side stream while backward goes
on with the earlier layers. `finish()` joins the side stream back before the optimizer runs.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch
import torch.distributed as dist

# Smaller than DDP's 25 MiB: the last bucket's all-reduce cannot overlap backward, so keep it short
# (ResNet-50 at 224×224 on 2× H200: 4 MiB buckets beat 10 and 25; 1 and 2 MiB gained nothing more).
BUCKET_BYTES = 4 << 20


def flat_groups(items: Iterable[Any], dtype_of: Callable[[Any], torch.dtype] = lambda t: t.dtype) -> list[list[Any]]:
    """The items grouped by dtype: one flat buffer (one collective) per group."""
    groups: dict[torch.dtype, list[Any]] = {}
    for item in items:
        groups.setdefault(dtype_of(item), []).append(item)
    return list(groups.values())


def _unflatten_into(flat: torch.Tensor, group: list[torch.Tensor]) -> None:
    parts = flat.split([t.numel() for t in group])
    torch._foreach_copy_(group, [part.view(t.shape) for part, t in zip(parts, group)])


def _dense(t: torch.Tensor) -> bool:
    return t.is_contiguous() or t.is_contiguous(memory_format=torch.channels_last)


def _memory_view(t: torch.Tensor) -> torch.Tensor:
    """A 1-D view of a tensor in its memory order: a channels_last gradient flattens without a copy."""
    return t.as_strided((t.numel(),), (1,)) if _dense(t) else t.reshape(-1)


def _laid_out_like(part: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    return part.as_strided(t.size(), t.stride()) if _dense(t) else part.view(t.shape)


def _average_in_place(flat: torch.Tensor) -> None:
    if dist.get_backend() == "nccl":  # NCCL divides inside the collective: no extra pass over the gradients
        dist.all_reduce(flat, op=dist.ReduceOp.AVG)
    else:  # gloo has no AVG
        dist.all_reduce(flat, op=dist.ReduceOp.SUM)
        flat.div_(dist.get_world_size())


def average(params: list[torch.nn.Parameter]) -> None:
    """One collective per dtype: copy the gradients into a flat buffer, average it in place, and make
    each gradient a view of it (copying back instead would cost two more passes over them)."""
    for group in flat_groups([p for p in params if p.grad is not None], dtype_of=lambda p: p.grad.dtype):
        grads = [p.grad for p in group]
        flat = torch.cat([_memory_view(g) for g in grads])
        _average_in_place(flat)
        for param, grad, part in zip(group, grads, flat.split([g.numel() for g in grads])):
            if grad.is_cuda:  # made on another stream and read on this one: keep its memory until this stream is done
                grad.record_stream(torch.cuda.current_stream())
            param.grad = _laid_out_like(part, grad)


@torch.no_grad()
def broadcast_from_rank0(tensors: list[torch.Tensor]) -> None:
    """Every rank takes rank 0's values, as DDP does with parameters at start and buffers each step."""
    for group in flat_groups(tensors):
        flat = torch.cat([t.detach().reshape(-1) for t in group])
        dist.broadcast(flat, src=0)
        _unflatten_into(flat, group)


class BucketAverager:
    def __init__(self, params: list[torch.nn.Parameter], device: torch.device,
                 bucket_bytes: int = BUCKET_BYTES) -> None:
        self.buckets: list[list[torch.nn.Parameter]] = []
        size = bucket_bytes
        for param in reversed(params):  # backward makes the last layers' gradients first
            if size >= bucket_bytes:
                self.buckets.append([])
                size = 0
            self.buckets[-1].append(param)
            size += param.numel() * param.element_size()
        self.bucket_of = {id(p): i for i, bucket in enumerate(self.buckets) for p in bucket}
        self.waiting = [0] * len(self.buckets)
        self.stream = torch.cuda.Stream(device) if device.type == "cuda" else None
        self.active = False
        for param in params:
            param.register_post_accumulate_grad_hook(self._grad_ready)

    def start(self) -> None:
        self.waiting = [len(bucket) for bucket in self.buckets]
        self.active = True

    def _grad_ready(self, param: torch.Tensor) -> None:
        if not self.active:
            return
        index = self.bucket_of[id(param)]
        self.waiting[index] -= 1
        if self.waiting[index] == 0:
            self._reduce(self.buckets[index])

    def _reduce(self, bucket: list[torch.nn.Parameter]) -> None:
        if self.stream is None:
            average(bucket)
            return
        self.stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.stream):
            average(bucket)

    def finish(self) -> None:
        """Reduce what is left (a bucket with a parameter forward never used), then join the side stream."""
        for index, waiting in enumerate(self.waiting):
            if waiting > 0:
                self._reduce(self.buckets[index])
        self.active = False
        if self.stream is not None:
            torch.cuda.current_stream().wait_stream(self.stream)
