"""Every rank calls the project's build_dataset, which downloads CIFAR-100 (ConvNeXt style)."""
import datetime

import torch.distributed as dist
from torch.utils.data import DataLoader, DistributedSampler

from data_sets import build_dataset, build_guarded


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(minutes=5))
    train = build_dataset(True)
    test = build_dataset(False)
    other = build_guarded(dist.get_rank())
    sampler = DistributedSampler(train)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for x, y in DataLoader(train, batch_size=32, sampler=sampler):
            pass
    return test, other


if __name__ == "__main__":
    main()
