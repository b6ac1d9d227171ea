"""The global rank for data and rank-0 work, the local rank (or rank % GPUs per node) for the GPU."""
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def train(local_rank):
    model = torch.nn.Linear(10, 5).to(local_rank)
    ddp_model = DDP(model, device_ids=[local_rank])
    ddp_model(torch.randn(20, 10).to(local_rank)).sum().backward()


if __name__ == "__main__":
    rank = int(os.environ["RANK"])
    local_rank = int(os.environ["LOCAL_RANK"])
    device = rank % torch.cuda.device_count()
    torch.cuda.set_device(device)
    dist.init_process_group("nccl")
    if rank == 0:
        print("starting")
    train(local_rank)
    dist.destroy_process_group()
