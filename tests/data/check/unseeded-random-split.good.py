"""The same split on every rank: a generator seeded with a constant."""
import torch
import torch.distributed as dist
from torch.utils.data import TensorDataset, random_split

dist.init_process_group("gloo")
dataset = TensorDataset(torch.arange(100.0))
train_set, test_set = random_split(dataset, [90, 10], generator=torch.Generator().manual_seed(42))
