"""One machine by design: the processes it starts meet on loopback."""
import os

import torch.distributed as dist
import torch.multiprocessing as mp


def train(rank, world_size):
    dist.init_process_group("gloo", world_size=world_size, rank=rank)


if __name__ == "__main__":
    os.environ["MASTER_ADDR"] = "localhost"
    os.environ.setdefault("MASTER_PORT", "29500")
    mp.spawn(train, nprocs=2, args=(2,))
