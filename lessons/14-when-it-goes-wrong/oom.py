"""Lesson 14, GPU: a real CUDA out-of-memory on one rank, and what the error says.

    torchrun --nproc-per-node 2 oom.py
"""
import gc
import json
import os
from datetime import timedelta

import torch
import torch.distributed as dist


def report(**fields):
    print("REPORT " + json.dumps(fields), flush=True)


def main():
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group(backend="nccl", timeout=timedelta(seconds=60))
    rank = dist.get_rank()
    try:
        total = torch.cuda.get_device_properties(local_rank).total_memory
        report(rank=rank, total_gib=round(total / 2**30, 1))
        if rank == 1:
            # Ask for more than the whole GPU holds: the allocator raises torch.cuda.OutOfMemoryError.
            torch.empty(int(total * 1.5) // 4, dtype=torch.float32, device="cuda")
        dist.barrier(device_ids=[local_rank])  # rank 0 waits here for rank 1, which never arrives
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
    # Free DDP's and gloo's last work objects while Python is fully alive: left to the exit, they can
    # abort the process after a successful run ("terminate called without an active exception").
    gc.collect()
