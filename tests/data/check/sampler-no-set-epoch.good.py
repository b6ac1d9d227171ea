from torch.utils.data import DataLoader, DistributedSampler

sampler = DistributedSampler(dataset)
loader = DataLoader(dataset, batch_size=32, sampler=sampler)
for epoch in range(10):
    loader.sampler.set_epoch(epoch)
    for x, y in loader:
        train_step(x, y)
