"""The rank setup lives in utils.py (read from the environment there); --local_rank is a fallback."""
import argparse

import torch
from torch.nn.parallel import DistributedDataParallel

import utils


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--local_rank", type=int, default=0)
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()
    utils.init_distributed_mode(args)
    model = DistributedDataParallel(torch.nn.Linear(8, 2).cuda(), device_ids=[args.gpu])
    print(f"training for {args.epochs} epochs")
    for epoch in range(args.epochs):
        print(f"epoch {epoch}")
    utils.save_on_master(model.module.state_dict(), "model.pt")


if __name__ == "__main__":
    main()
