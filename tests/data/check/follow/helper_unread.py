"""The setup comes from a package that is not in this folder: the checker cannot read it."""
import argparse

import torch
from torch.nn.parallel import DistributedDataParallel

from training_toolkit.dist import init_distributed_mode


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--local_rank", type=int, default=0)
    args = parser.parse_args()
    init_distributed_mode(args)
    model = DistributedDataParallel(torch.nn.Linear(8, 2).cuda(), device_ids=[args.gpu])
    print("model ready")
    return model


if __name__ == "__main__":
    main()
