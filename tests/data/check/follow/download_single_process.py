"""One process, no distributed setup: download=True is the normal thing to do."""
import torch
from torch.utils.data import DataLoader
from torchvision import datasets, transforms

train = datasets.MNIST("data", train=True, download=True, transform=transforms.ToTensor())
loader = DataLoader(train, batch_size=64, shuffle=True)
model = torch.nn.Linear(784, 10)
checkpoint = torch.load("mnist.pt")
