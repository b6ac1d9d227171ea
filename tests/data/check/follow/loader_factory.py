"""A library function that builds a sharded loader for its caller: set_epoch is the caller's job."""
from torch.utils.data import DataLoader, DistributedSampler


def create_loader(dataset, batch_size, distributed):
    sampler = DistributedSampler(dataset) if distributed else None
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler, shuffle=sampler is None)
