"""The baseline `mgtutor bench allreduce` is compared with: a plain torch.distributed.all_reduce
loop (in place, eager, no CUDA graph), timed with CUDA events around back-to-back calls.

    python -m torch.distributed.run --nproc-per-node 2 tests/bench/plain_allreduce_loop.py [--sizes 8,512M,2G] [--iters 20]
"""
from __future__ import annotations

import argparse
import os

import torch
import torch.distributed as dist

UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def size(text: str) -> int:
    return int(text[:-1]) * UNITS[text[-1].upper()] if text[-1].upper() in UNITS else int(text)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--sizes", default="8,1M,128M,512M,2G")
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    args = p.parse_args()
    local = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    world = dist.get_world_size()
    for nbytes in (size(s) for s in args.sizes.split(",")):
        x = torch.ones(max(1, nbytes // 4), device="cuda")
        for _ in range(args.warmup):
            dist.all_reduce(x)
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(args.iters):
            dist.all_reduce(x)
        end.record()
        end.synchronize()
        us = start.elapsed_time(end) * 1000 / args.iters
        algbw = x.numel() * 4 / (us * 1e-6) / 1e9
        if dist.get_rank() == 0:
            print(f"plain loop {x.numel() * 4:>12} B  {us:10.2f} us  algbw {algbw:8.2f}  "
                  f"busbw {algbw * 2 * (world - 1) / world:8.2f} GB/s", flush=True)
        del x
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
