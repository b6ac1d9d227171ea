"""Three loaders: tensors and MNIST live in memory (num_workers=0 is right); ImageFolder reads files."""
import datetime

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset
from torchvision import datasets, transforms


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(minutes=5))
    tensors = TensorDataset(torch.randn(1024, 8), torch.randint(0, 2, (1024,)))
    digits = datasets.MNIST("data", train=False, transform=transforms.ToTensor())
    photos = datasets.ImageFolder("photos/train", transform=transforms.ToTensor())
    samplers = [DistributedSampler(tensors), DistributedSampler(digits), DistributedSampler(photos)]
    synthetic = DataLoader(tensors, batch_size=64, sampler=samplers[0])
    mnist = DataLoader(digits, batch_size=64, sampler=samplers[1])
    images = DataLoader(photos, batch_size=64, sampler=samplers[2])
    for epoch in range(2):
        for sampler in samplers:
            sampler.set_epoch(epoch)
    return synthetic, mnist, images


if __name__ == "__main__":
    main()
