"""mp.spawn over several nodes with the rendezvous host written into the code."""
import argparse
import os

import torch.distributed as dist
import torch.multiprocessing as mp


def train(gpu, args):
    rank = args.nr * args.gpus + gpu
    dist.init_process_group("gloo", world_size=args.world_size, rank=rank)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=1)
    parser.add_argument("--gpus", type=int, default=1)
    parser.add_argument("--nr", type=int, default=0)
    args = parser.parse_args()
    args.world_size = args.gpus * args.nodes
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = "8888"
    mp.spawn(train, nprocs=args.gpus, args=(args,))
