"""What DDP does for a step, done by hand so that it can live inside a CUDA graph.

DDP's own autograd hooks cannot be captured (steps.GraphStepper says why). `BucketAverager` does
the same job the same way: a hook on every parameter notes when its gradient is ready; once all
gradients of a bucket are, the bucket's all-reduce starts on a side stream while backward goes
on with the earlier layers. `finish()` joins the side stream back before the optimizer runs.
"""
from __future__ import annotations

from collections.abc import Iterable

import torch
import torch.distributed as dist

# Smaller than DDP's 25 MiB: the last bucket's all-reduce cannot overlap backward, so keep it short.
BUCKET_BYTES = 10 << 20


def flat_groups(tensors: Iterable[torch.Tensor]) -> list[list[torch.Tensor]]:
    """The tensors grouped by dtype: one flat buffer (one collective) per group."""
    groups: dict[torch.dtype, list[torch.Tensor]] = {}
    for tensor in tensors:
        groups.setdefault(tensor.dtype, []).append(tensor)
    return list(groups.values())


def _unflatten_into(flat: torch.Tensor, group: list[torch.Tensor]) -> None:
    parts = flat.split([t.numel() for t in group])
    torch._foreach_copy_(group, [part.view(t.shape) for part, t in zip(parts, group)])


def average(grads: list[torch.Tensor]) -> None:
    """One all-reduce per dtype: a copy in and out costs far less than one collective per parameter."""
    for group in flat_groups(grads):
        flat = torch.cat([g.reshape(-1) for g in group])
        dist.all_reduce(flat, op=dist.ReduceOp.SUM)
        flat.div_(dist.get_world_size())
        _unflatten_into(flat, group)


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
        grads = [p.grad for p in bucket if p.grad is not None]
        if self.stream is None:
            average(grads)
            return
        self.stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.stream):
            average(grads)

    def finish(self) -> None:
        """Reduce what is left (a bucket with a parameter forward never used), then join the side stream."""
        for index, waiting in enumerate(self.waiting):
            if waiting > 0:
                self._reduce(self.buckets[index])
        self.active = False
        if self.stream is not None:
            torch.cuda.current_stream().wait_stream(self.stream)
