"""torchrun script that uses the global rank as the GPU index (right on one node only)."""
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def train(rank):
    model = torch.nn.Linear(10, 5).to(rank)
    ddp_model = DDP(model, device_ids=[rank])
    ddp_model(torch.randn(20, 10).to(rank)).sum().backward()


if __name__ == "__main__":
    rank = int(os.environ["RANK"])
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl")
    train(rank)
    dist.destroy_process_group()
