from torch.utils.data import DataLoader, DistributedSampler

sampler = DistributedSampler(dataset) if distributed else None
loader = DataLoader(dataset, batch_size=32, sampler=sampler, shuffle=(sampler is None))
