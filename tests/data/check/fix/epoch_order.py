"""Each rank prints the first index it reads in each epoch; without set_epoch every epoch repeats."""
import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

dist.init_process_group("gloo")
data = TensorDataset(torch.arange(64))
sampler = DistributedSampler(data)
loader = DataLoader(data, batch_size=8, sampler=sampler)
for epoch in range(3):
    firsts = [int(batch[0][0]) for batch in loader]
    print(f"rank {dist.get_rank()} epoch {epoch} order {firsts}", flush=True)
dist.destroy_process_group()
