"""Only the --local_rank argument, under torchrun: every rank keeps the default and picks GPU 0."""
import argparse
import datetime

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--local_rank", type=int, default=0)
    args = parser.parse_args()
    torch.cuda.set_device(args.local_rank)
    dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo",
                            timeout=datetime.timedelta(minutes=5))
    return DistributedDataParallel(torch.nn.Linear(8, 2).cuda(), device_ids=[args.local_rank])


if __name__ == "__main__":
    main()
