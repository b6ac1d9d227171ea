"""Accelerate runs this on every process: each one downloads the same archive at once."""
from accelerate import Accelerator
from torch.utils.data import DataLoader
from torchvision import datasets, transforms


def main():
    accelerator = Accelerator()
    train = datasets.CIFAR10("data", train=True, download=True, transform=transforms.ToTensor())
    loader = DataLoader(train, batch_size=64, shuffle=True, num_workers=4, pin_memory=True)
    return accelerator.prepare(loader)


if __name__ == "__main__":
    main()
