"""A plain DDP training script with no mgtutor import: gloo on CPU, a tiny model, a DataLoader with a
DistributedSampler, SGD, 30 steps. `mgtutor run` measures it from outside (tests/test_rank_hook_run.py)."""
import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

STEPS = int(os.environ.get("PLAIN_DDP_STEPS", "30"))
BATCH = 8


def main() -> None:
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(STEPS * BATCH * dist.get_world_size(), 16), torch.randint(0, 4, (STEPS * BATCH * dist.get_world_size(),)))
    sampler = DistributedSampler(data)
    loader = DataLoader(data, batch_size=BATCH, sampler=sampler)
    model = DistributedDataParallel(nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    for inputs, labels in loader:
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(inputs), labels)
        loss.backward()
        optimizer.step()
    if dist.get_rank() == 0:
        print(f"done, last loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
