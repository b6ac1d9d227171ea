"""Lesson 7: the same DDP training with Hugging Face Accelerate doing the plumbing.

    accelerate launch --num_processes 2 example.py      or      torchrun --nproc-per-node 2 example.py
Needs `pip install accelerate`.
"""
import json
import os
import sys

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

try:
    from accelerate import Accelerator
except ImportError:
    print("this lesson needs Accelerate: pip install accelerate", file=sys.stderr)
    sys.exit(2)


def report(**fields):
    print("REPORT " + json.dumps(fields), flush=True)


class SyntheticSet(Dataset):
    def __init__(self, size, features=16):
        generator = torch.Generator().manual_seed(1234)
        self.x = torch.randn(size, features, generator=generator)
        self.y = (self.x.sum(dim=1) > 0).long()

    def __len__(self):
        return len(self.x)

    def __getitem__(self, index):
        return index, self.x[index], self.y[index]


def main():
    # Accelerate reads what torchrun (or `accelerate launch`) set, picks the device and the backend,
    # and starts the process group itself.
    # On the CPU when the launcher chose gloo (no GPU, or fewer GPUs than processes).
    backend = os.environ.get("MGTUTOR_BACKEND") or ("nccl" if torch.cuda.is_available() else "gloo")
    accelerator = Accelerator(cpu=backend != "nccl")
    torch.manual_seed(0)
    dataset = SyntheticSet(64)
    model = nn.Linear(16, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(dataset, batch_size=8, shuffle=True)
    # prepare(): moves the model to the device and wraps it in DDP, shards the loader per process.
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)

    seen = []
    for indices, x, y in loader:
        seen.extend(indices.tolist())
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        accelerator.backward(loss)  # instead of loss.backward(): handles scaling and sync
        optimizer.step()
    checksum = sum(p.detach().double().sum().item() for p in model.parameters())
    if accelerator.is_main_process:
        print(f"{accelerator.num_processes} processes on {accelerator.device}, "
              f"distributed type {accelerator.distributed_type}")
    print(f"process {accelerator.process_index}: {len(seen)} samples, weights checksum {checksum:.6f}")
    report(process=accelerator.process_index, processes=accelerator.num_processes, indices=seen,
           dataset_size=len(dataset), param_checksum=round(checksum, 6), device=str(accelerator.device))
    accelerator.wait_for_everyone()  # all processes done before teardown, as in the plain DDP lessons
    accelerator.end_training()


if __name__ == "__main__":
    main()
