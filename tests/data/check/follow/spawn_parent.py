"""mp.spawn: the parent prints its plan and downloads the data once; the workers print per rank."""
import datetime

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.utils.data import DataLoader, DistributedSampler
from torchvision import datasets, transforms


def worker(rank, world_size):
    dist.init_process_group("gloo", rank=rank, world_size=world_size, init_method="tcp://127.0.0.1:29511",
                            timeout=datetime.timedelta(minutes=5))
    data = datasets.MNIST("data", train=True, download=False, transform=transforms.ToTensor())
    sampler = DistributedSampler(data)
    loader = DataLoader(data, batch_size=32, sampler=sampler)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for x, y in loader:
            pass
        print(f"epoch {epoch} done")


def main():
    world_size = torch.cuda.device_count() or 2
    print(f"starting {world_size} workers")
    datasets.MNIST("data", train=True, download=True)
    mp.spawn(worker, args=(world_size,), nprocs=world_size)
    print("all workers finished")


if __name__ == "__main__":
    main()
