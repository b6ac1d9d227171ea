import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

dist.init_process_group("gloo")
dataset = TensorDataset(torch.rand(64, 4))
loader = DataLoader(dataset, batch_size=8, sampler=DistributedSampler(dataset))
fixed = DistributedSampler(dataset, num_replicas=2, rank=0)


def main():
    for epoch in range(2):
        loader.sampler.set_epoch(epoch)
        for (x,) in loader:
            x.sum()


if __name__ == "__main__":
    main()
