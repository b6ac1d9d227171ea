"""The sampler is made here; the engine module calls set_epoch on it each epoch (DeiT/MAE style)."""
import datetime

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

from engine import train_one_epoch


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(minutes=5))
    data = TensorDataset(torch.randn(256, 4), torch.randn(256, 1))
    loader = DataLoader(data, batch_size=16, sampler=DistributedSampler(data))
    for epoch in range(3):
        train_one_epoch(loader, epoch)


if __name__ == "__main__":
    main()
