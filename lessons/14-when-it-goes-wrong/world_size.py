"""Lesson 14 exercise: torchrun starts 2 ranks, but the script tells the process group the job has 3.
init_process_group then waits for a third rank that never comes (here for 20 s; PyTorch's default is
10 to 30 minutes), and the run fails. Fix the script so that torchrun's environment decides.

    torchrun --nproc-per-node 2 world_size.py
"""
import datetime
import json
import os

import torch
import torch.distributed as dist


def report(**fields):
    print("REPORT " + json.dumps(fields), flush=True)


def main():
    os.environ["WORLD_SIZE"] = "3"  # "our job has three workers"
    local_rank = int(os.environ["LOCAL_RANK"])
    gpus_enough = torch.cuda.is_available() and torch.cuda.device_count() >= int(os.environ["LOCAL_WORLD_SIZE"])
    if gpus_enough:
        torch.cuda.set_device(local_rank)
    device = torch.device("cuda", local_rank) if gpus_enough else torch.device("cpu")
    dist.init_process_group("nccl" if gpus_enough else "gloo", timeout=datetime.timedelta(seconds=20))
    try:
        ones = torch.ones(1, device=device)
        dist.all_reduce(ones)  # every rank adds its 1: the sum is the number of ranks
        report(world_size=dist.get_world_size(), ranks_that_answered=int(ones.item()), rank=dist.get_rank())
        dist.barrier()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
