"""Run as `python -m trainpkg.main` from src/: the package imports its own modules by its name."""
import argparse

import torch
from torch.nn.parallel import DistributedDataParallel

from trainpkg.distributed import init_distributed_device


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--local_rank", type=int, default=0)
    args = parser.parse_args()
    device = init_distributed_device(args)
    print("model ready")
    return DistributedDataParallel(torch.nn.Linear(8, 2).to(device), device_ids=[device])


if __name__ == "__main__":
    main()
