import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

dataset = TensorDataset(torch.rand(64, 4))
loader = DataLoader(dataset, batch_size=8, sampler=DistributedSampler(dataset))


def main():
    dist.init_process_group("gloo")
    for epoch in range(2):
        loader.sampler.set_epoch(epoch)
        for (x,) in loader:
            x.sum()


if __name__ == "__main__":
    main()
