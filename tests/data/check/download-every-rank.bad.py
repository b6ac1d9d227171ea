"""Every rank downloads CIFAR-10 into the same folder at once."""
import os

import torch.distributed as dist
from torch.utils.data import DataLoader, DistributedSampler
from torchvision import datasets, transforms


def main():
    dist.init_process_group("gloo")
    train = datasets.CIFAR10("data", train=True, download=True, transform=transforms.ToTensor())
    sampler = DistributedSampler(train)
    loader = DataLoader(train, batch_size=64, sampler=sampler)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for x, y in loader:
            pass


if __name__ == "__main__":
    main()
