"""The seed article's DDP demo as typed in (synthetic data instead of CIFAR-10, so it runs offline)."""
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def setup_ddp():
    rank = int(os.environ["RANK"])
    local_rank = int(os.environ["LOCAL_RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    # initialise the process group
    dist.init_process_group(
        backend="nccl",  # NVIDIA's backend, the fastest
        init_method="env://",
        world_size=world_size,
        rank=rank
    )
    torch.cuda.set_device(local_rank)
    return rank, local_rank, world_size


def train():
    rank, local_rank, world_size = setup_ddp()
    dataset = TensorDataset(torch.randn(256, 16), torch.randint(0, 4, (256,)))
    sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank)
    loader = DataLoader(dataset, batch_size=32, sampler=sampler)
    model = nn.Linear(16, 4)
    model = model.cuda()
    model = DDP(model, device_ids=[local_rank])
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for data, target in loader:
            data, target = data.cuda(), target.cuda()
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(data), target)
            loss.backward()
            optimizer.step()
        if rank == 0:
            print(f"epoch {epoch} loss {loss.item():.4f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    train()
