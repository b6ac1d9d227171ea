"""Fault injection: each mode makes the real failure happen, never a printed imitation of it.

The lessons and the failure classifier need the genuine messages PyTorch, NCCL and the OS print,
so every mode here drives the real mechanism (a rank that never joins, an allocation that really
fails, a NaN that really propagates through the all-reduce).
"""
from __future__ import annotations

import resource
import time

import torch

_CHUNK = 64 << 20


def hang_before_init() -> None:
    """This rank never calls init_process_group; the others hit the real rendezvous timeout and
    torchrun then stops this one."""
    while True:
        time.sleep(1.0)


def _vm_size_bytes() -> int:
    with open("/proc/self/statm") as handle:
        pages = int(handle.read().split()[0])
    return pages * resource.getpagesize()


def exhaust_memory(device: torch.device) -> None:
    """Allocate until the allocator really fails: CUDA OOM on a GPU, MemoryError on a CPU.

    On a CPU the address space is first capped (RLIMIT_AS) a little above what the process maps,
    so the real MemoryError comes after ~256 MiB instead of after the machine starts swapping.
    """
    chunks: list[object] = []
    try:
        if device.type == "cuda":
            while True:  # torch.OutOfMemoryError: CUDA out of memory. Tried to allocate …
                chunks.append(torch.empty(1 << 30, dtype=torch.uint8, device=device))
        limit = _vm_size_bytes() + (256 << 20)
        _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        resource.setrlimit(resource.RLIMIT_AS, (limit if hard == resource.RLIM_INFINITY else min(limit, hard), hard))
        while True:
            chunks.append(bytearray(_CHUNK))  # MemoryError once the address space is used up
    except BaseException:
        chunks.clear()  # free it, so reporting the error does not fail for lack of memory
        if device.type == "cuda":
            torch.cuda.empty_cache()
        raise


def crash(rank: int, step: int) -> None:
    raise RuntimeError(f"injected crash: rank {rank} raised at step {step}")


def poison(images: torch.Tensor) -> torch.Tensor:
    """A NaN sample (a corrupt record): the loss turns NaN and the all-reduce spreads NaN gradients
    to every rank, so all replicas are ruined from this step on."""
    images = images.clone()
    images[0] = float("nan")
    return images
