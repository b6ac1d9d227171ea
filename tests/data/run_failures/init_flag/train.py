"""DDP behind a --distributed flag (the shape of many research scripts): without the flag the script
skips init_process_group, and wrapping the model in DDP then finds no process group."""
import argparse

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--distributed", action="store_true", help="train with DDP under torchrun")
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args()

    if args.distributed:
        dist.init_process_group(backend="gloo")
    model = DDP(nn.Linear(8, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(args.steps):
        optimizer.zero_grad()
        model(torch.randn(4, 8)).pow(2).mean().backward()
        optimizer.step()
    if dist.get_rank() == 0:
        print(f"trained {args.steps} steps")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
