"""The 'first process downloads, the others wait' pattern: barriers on both sides are intended."""
import argparse
import os

import torch
from torch.utils.data import DataLoader, RandomSampler
from torch.utils.data.distributed import DistributedSampler


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--local_rank", type=int, default=int(os.environ.get("LOCAL_RANK", -1)))
    args = parser.parse_args()
    if args.local_rank != -1:
        torch.cuda.set_device(args.local_rank)
        torch.distributed.init_process_group(backend="nccl")
    if args.local_rank not in [-1, 0]:
        torch.distributed.barrier()
    dataset = download_and_cache()
    if args.local_rank == 0:
        torch.distributed.barrier()
    sampler = RandomSampler(dataset) if args.local_rank == -1 else DistributedSampler(dataset)
    loader = DataLoader(dataset, sampler=sampler, batch_size=8, num_workers=4)
    for epoch in range(3):
        if args.local_rank != -1:
            sampler.set_epoch(epoch)
        for batch in loader:
            train_step(batch)
    if args.local_rank in [-1, 0]:
        torch.save(model_state(), "out.pt")


if __name__ == "__main__":
    main()
