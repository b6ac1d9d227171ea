"""mp.spawn with a rank parameter; rank 0 saves and evaluates on its own GPU (or the CPU without one)."""
import datetime

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler


def run(rank, world_size, epochs):
    dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo", rank=rank,
                            world_size=world_size, init_method="tcp://127.0.0.1:29500",
                            timeout=datetime.timedelta(minutes=5))
    device = torch.device("cuda", rank) if torch.cuda.is_available() else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    model = DistributedDataParallel(build().to(device), device_ids=[rank] if device.type == "cuda" else None)
    sampler = DistributedSampler(data, num_replicas=world_size, rank=rank)
    loader = DataLoader(data, batch_size=16, sampler=sampler)
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        for x, y in loader:
            loss = model(x.to(device)).sum()
            loss.backward()
        if rank == 0:
            print(f"epoch {epoch} done")
            save(model)
        dist.barrier()
    dist.destroy_process_group()


def save(model):
    torch.save(model.module.state_dict(), "model.pt")


if __name__ == "__main__":
    mp.spawn(run, args=(2, 5), nprocs=2)
