"""Lesson 16: FSDP2 (fully_shard): each rank keeps only a shard of the weights, gradients and optimizer state.

    torchrun --nproc-per-node 2 example.py
"""
import argparse
import gc
import json
import os
from datetime import timedelta

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import init_device_mesh

try:  # torch 2.6+
    from torch.distributed.fsdp import fully_shard
except ImportError:  # torch 2.4-2.5
    from torch.distributed._composable.fsdp import fully_shard


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
    parser.add_argument("--hidden", type=int, default=None)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--steps", type=int, default=3)
    args = parser.parse_args()
    rank, world, local_rank, device = setup()
    try:
        hidden = args.hidden or (8192 if device.type == "cuda" else 64)

        torch.manual_seed(0)
        model = nn.Sequential(*[nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU()) for _ in range(args.layers)],
                              nn.Linear(hidden, 10)).to(device)
        full = sum(p.numel() for p in model.parameters())
        # The mesh says which ranks share the shards, and on which device (left out, it is the GPU
        # whenever one exists, even for ranks the launcher put on the CPU).
        mesh = init_device_mesh(device.type, (world,))
        for block in model:  # shard block by block: only one block's full weights exist at a time
            fully_shard(block, mesh=mesh)
        fully_shard(model, mesh=mesh)
        local = sum(p.to_local().numel() for p in model.parameters())  # parameters are now DTensors
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)  # its state is sharded too

        torch.manual_seed(100 + rank)
        for step in range(args.steps):
            x = torch.randn(16, hidden, device=device)
            loss = model(x).pow(2).mean()
            loss.backward()  # gradients are reduce-scattered: each rank keeps its shard's
            optimizer.step()
            optimizer.zero_grad()
        # The full weights, gathered from the shards, are the same wherever you gather them.
        checksum = sum(p.full_tensor().double().sum().item() for p in model.parameters())
        peak = torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else None
        print(f"rank {rank}: holds {local:,} of {full:,} parameters ({local / full:.0%}), loss {loss.item():.4f}"
              + (f", peak memory {peak:.2f} GiB" if peak is not None else ""))
        report(rank=rank, full_params=full, local_params=local, shard_fraction=round(local / full, 4),
               full_checksum=round(checksum, 5), peak_gib=None if peak is None else round(peak, 3),
               replica_gib=round(full * 4 * 4 / 2**30, 3))  # weights+grads+2 Adam states in fp32, if not sharded
        # all ranks finish before any tears down: an early exit can abort a peer's last collective
        dist.barrier(device_ids=[local_rank] if device.type == "cuda" else None)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
    # Free DDP's and gloo's last work objects while Python is fully alive: left to the exit, they can
    # abort the process after a successful run ("terminate called without an active exception").
    gc.collect()
