"""The helper that reads the rank from the environment sits in the same file."""
import argparse
import datetime
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel


def setup(args):
    args.rank = int(os.environ["RANK"])
    args.gpu = args.rank % torch.cuda.device_count()
    torch.cuda.set_device(args.gpu)
    dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo",
                            timeout=datetime.timedelta(minutes=5))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--local_rank", type=int, default=-1)
    args = parser.parse_args()
    setup(args)
    return DistributedDataParallel(torch.nn.Linear(8, 2).cuda(), device_ids=[args.gpu])


if __name__ == "__main__":
    main()
