"""The imagenet shape: mp.spawn or env:// (torchrun); the save guard tests the spawn flag."""
import argparse
import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

parser = argparse.ArgumentParser()
parser.add_argument("--multiprocessing-distributed", action="store_true")
parser.add_argument("--dist-url", default="env://")


def main_worker(gpu, ngpus_per_node, args):
    args.rank = int(os.environ["RANK"]) if gpu is None else gpu
    dist.init_process_group("gloo", init_method=args.dist_url, rank=args.rank,
                            world_size=int(os.environ.get("WORLD_SIZE", ngpus_per_node)))
    state = {"w": torch.zeros(3)}
    if not args.multiprocessing_distributed or (args.multiprocessing_distributed
                                                and args.rank % ngpus_per_node == 0):
        torch.save(state, "checkpoint.pth.tar")


def main():
    args = parser.parse_args()
    if args.multiprocessing_distributed:
        mp.spawn(main_worker, nprocs=2, args=(2, args))
    else:
        main_worker(None, 1, args)


if __name__ == "__main__":
    main()
