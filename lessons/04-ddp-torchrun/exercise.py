"""Lesson 4 exercise: the ranks train, but their copies of the model drift apart. Fix it.

    torchrun --nproc-per-node 2 example.py          (GPUs: NCCL; no GPU: gloo on CPU)
"""
import argparse
import gc
import json
import os
import time
from datetime import timedelta

import torch
import torch.distributed as dist
from torch import nn


def report(**fields):
    print("REPORT " + json.dumps(fields), flush=True)


def setup():
    """torchrun sets RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT; env:// reads them."""
    backend = os.environ.get("MGTUTOR_BACKEND") or ("nccl" if torch.cuda.is_available() else "gloo")
    local_rank = int(os.environ["LOCAL_RANK"])
    if backend == "nccl":
        torch.cuda.set_device(local_rank)  # before any CUDA work, or every rank piles onto cuda:0
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")
    dist.init_process_group(backend=backend, init_method="env://", timeout=timedelta(seconds=60))
    return dist.get_rank(), dist.get_world_size(), local_rank, device


def make_model(features, hidden, classes):
    return nn.Sequential(nn.Linear(features, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                         nn.Linear(hidden, classes))


def main():
    cuda = (os.environ.get("MGTUTOR_BACKEND") or ("nccl" if torch.cuda.is_available() else "gloo")) == "nccl"
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, default=512 if cuda else 32, help="per rank")
    parser.add_argument("--hidden", type=int, default=4096 if cuda else 64)
    parser.add_argument("--steps", type=int, default=200 if cuda else 8)
    parser.add_argument("--warmup", type=int, default=20 if cuda else 2)
    args = parser.parse_args()
    rank, world, local_rank, device = setup()
    try:
        print(f"rank {rank}/{world} local_rank {local_rank} on {device}, "
              f"master {os.environ.get('MASTER_ADDR')}:{os.environ.get('MASTER_PORT')}")

        torch.manual_seed(0)  # the same initial weights everywhere (DDP also broadcasts rank 0's)
        model = make_model(256, args.hidden, 10).to(device)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

        torch.manual_seed(100 + rank)  # each rank gets different data, as a sampler would give it
        x = torch.randn(args.batch_size, 256, device=device)
        y = torch.randint(0, 10, (args.batch_size,), device=device)
        for step in range(args.warmup + args.steps):
            if step == args.warmup:
                if device.type == "cuda":
                    torch.cuda.synchronize()
                start = time.perf_counter()
            loss = nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        if device.type == "cuda":
            torch.cuda.synchronize()
        elapsed = time.perf_counter() - start
        rate = args.steps * args.batch_size * world / elapsed

        # Every replica must hold the same weights: sum them up as a fingerprint.
        checksum = sum(p.detach().double().sum().item() for p in model.parameters())
        print(f"rank {rank}: loss {loss.item():.4f}, weights checksum {checksum:.6f}")
        if rank == 0:
            print(f"{world} ranks: {rate:,.0f} samples/s in all (batch {args.batch_size} per rank)")
        report(rank=rank, local_rank=local_rank, world_size=world, device=str(device),
               backend=dist.get_backend(), param_checksum=round(checksum, 6), loss=round(loss.item(), 5),
               samples_per_s=round(rate, 1))
        # all ranks finish before any tears down: an early exit can abort a peer's last collective
        dist.barrier(device_ids=[local_rank] if device.type == "cuda" else None)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
    # Free DDP's and gloo's last work objects while Python is fully alive: left to the exit, they can
    # abort the process after a successful run ("terminate called without an active exception").
    gc.collect()
