"""Lesson 5 exercise: two ranks, twice the GPUs, but are they really splitting the work?

    torchrun --nproc-per-node 2 THIS_FILE.py      (or: mgtutor lessons check 05-distributed-sampler)
Each rank prints the sample indices it trained on, per epoch.
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
from torch.utils.data import DataLoader, Dataset


def report(**fields):
    print("REPORT " + json.dumps(fields), flush=True)


class SyntheticSet(Dataset):
    """Sample i is the same on every rank; it also returns i so we can see who saw what."""

    def __init__(self, size, features=16):
        generator = torch.Generator().manual_seed(1234)
        self.x = torch.randn(size, features, generator=generator)
        self.y = (self.x.sum(dim=1) > 0).long()

    def __len__(self):
        return len(self.x)

    def __getitem__(self, index):
        return index, self.x[index], self.y[index]


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
    parser.add_argument("--samples", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()
    rank, world, local_rank, device = setup()
    try:
        torch.manual_seed(0)

        dataset = SyntheticSet(args.samples)
        loader = DataLoader(dataset, batch_size=args.batch_size, shuffle=True)
        model = DDP(nn.Linear(16, 2).to(device), device_ids=[local_rank] if device.type == "cuda" else None)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

        for epoch in range(args.epochs):
            seen = []
            for indices, x, y in loader:
                seen.extend(indices.tolist())
                loss = nn.functional.cross_entropy(model(x.to(device)), y.to(device))
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            print(f"rank {rank} epoch {epoch}: {len(seen)} samples, first {seen[:6]}")
            report(rank=rank, epoch=epoch, indices=seen, dataset_size=len(dataset), loss=round(loss.item(), 4))
        # all ranks finish before any tears down: an early exit can abort a peer's last collective
        dist.barrier(device_ids=[local_rank] if device.type == "cuda" else None)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
    # Free DDP's and gloo's last work objects while Python is fully alive: left to the exit, they can
    # abort the process after a successful run ("terminate called without an active exception").
    gc.collect()
