"""Lesson 14: three hangs on purpose. Nothing crashes; the ranks just stop moving.

    torchrun --nproc-per-node 2 hang.py --mode world-size     # the script asks for 3 ranks, 2 started
    torchrun --nproc-per-node 2 hang.py --mode skip-allreduce # rank 1 skips one all_reduce
    torchrun --nproc-per-node 2 hang.py --mode slow-loader    # rank 1's Dataset.__getitem__ never returns

Run it with `mgtutor run -- hang.py --mode ...`: within seconds of the ranks going quiet, mgtutor
takes every rank's Python stack and says where each one waits and why.
"""
import argparse
import gc
import os
import time

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler


class Numbers(Dataset):
    def __init__(self, stuck_rank):
        self.stuck_rank = stuck_rank

    def __len__(self):
        return 64

    def __getitem__(self, index):
        if int(os.environ["RANK"]) == self.stuck_rank and index >= 0:
            time.sleep(3600)  # stands in for a read from a dead network disk
        return torch.full((4,), float(index))


def setup(mode):
    if mode == "world-size":
        # The bug: a hard-coded world size. torchrun started 2 ranks; they wait for a third forever.
        os.environ["WORLD_SIZE"] = "3"
    dist.init_process_group("gloo")
    return dist.get_rank()


def skip_allreduce(rank, steps):
    grad = torch.ones(256)
    for step in range(steps):
        if rank == 1 and step == steps - 1:
            print(f"rank {rank}: skipping the all_reduce of step {step} (the bug)", flush=True)
        else:
            dist.all_reduce(grad)  # each rank waits here until every rank has called it
        print(f"rank {rank} step {step}", flush=True)
    dist.barrier()  # rank 1 arrives here while rank 0 still waits in its last all_reduce


def slow_loader(rank, stuck_rank):
    data = Numbers(stuck_rank)
    loader = DataLoader(data, batch_size=8, sampler=DistributedSampler(data), num_workers=2)
    for step, batch in enumerate(loader):
        total = batch.sum()
        dist.all_reduce(total)  # rank 0 waits here for rank 1, which is still loading its batch
        print(f"rank {rank} step {step} sum {total.item():g}", flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=["world-size", "skip-allreduce", "slow-loader"], required=True)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--stuck-rank", type=int, default=1)
    args = parser.parse_args()
    rank = setup(args.mode)
    try:
        print(f"rank {rank}: joined", flush=True)
        if args.mode == "skip-allreduce":
            skip_allreduce(rank, args.steps)
        else:
            slow_loader(rank, args.stuck_rank)
        dist.barrier()  # only reached when nothing hung
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
    gc.collect()
