"""Like timm: the script imports a package of its project whose __init__ re-exports the setup."""
import argparse

import torch
from torch.nn.parallel import DistributedDataParallel

from mylib import utils


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--local_rank", default=0, type=int)
    args = parser.parse_args()
    device = utils.init_distributed_device(args)
    model = DistributedDataParallel(torch.nn.Linear(8, 2).to(device), device_ids=[device])
    return model


if __name__ == "__main__":
    main()
