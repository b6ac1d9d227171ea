"""Lesson 14: one rank fails in the middle of training. What do the others do, and what do you see?

    torchrun --nproc-per-node 2 example.py --fail-rank 1 --fail-step 3
"""
import argparse
import gc
import json
import os
from datetime import timedelta

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


def report(**fields):
    print("REPORT " + json.dumps(fields), flush=True)


def setup():
    backend = os.environ.get("MGTUTOR_BACKEND") or ("nccl" if torch.cuda.is_available() else "gloo")
    local_rank = int(os.environ["LOCAL_RANK"])
    if backend == "nccl":
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")
    dist.init_process_group(backend=backend, timeout=timedelta(seconds=60))
    return dist.get_rank(), dist.get_world_size(), local_rank, device


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--fail-rank", type=int, default=1)
    parser.add_argument("--fail-step", type=int, default=3)
    parser.add_argument("--steps", type=int, default=6)
    args = parser.parse_args()
    rank, world, local_rank, device = setup()
    try:
        model = DDP(nn.Linear(16, 4).to(device), device_ids=[local_rank] if device.type == "cuda" else None)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for step in range(args.steps):
            if rank == args.fail_rank and step == args.fail_step:
                # Stands in for a real bug on one rank: a bad sample, an OOM, a NaN check that raises.
                raise RuntimeError(f"rank {rank} hit a bug at step {step} (this failure is on purpose)")
            loss = model(torch.randn(8, 16, device=device)).pow(2).mean()
            optimizer.zero_grad()
            loss.backward()  # the other ranks wait here for the failed rank's gradients
            optimizer.step()
            print(f"rank {rank} step {step} done", flush=True)
            report(rank=rank, step=step)
        # all ranks finish before any tears down: an early exit can abort a peer's last collective
        dist.barrier(device_ids=[local_rank] if device.type == "cuda" else None)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
    # Free DDP's and gloo's last work objects while Python is fully alive: left to the exit, they can
    # abort the process after a successful run ("terminate called without an active exception").
    gc.collect()
