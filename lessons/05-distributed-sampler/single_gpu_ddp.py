"""Lesson 5: a plain one-device training script, the kind you start from. `mgtutor convert` turns it into
the DDP script single_gpu_ddp.py (shown in the lesson); nothing here knows about ranks.

    python single_gpu.py
"""
from datetime import timedelta
import json
import os

import torch
from torch import nn
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler


def ddp_setup(device=None):
    """Join the process group torchrun describes in the environment, once: NCCL with this rank's GPU
    when the script asks for CUDA (or for no device in particular) and this machine has a GPU for each
    of its ranks, gloo on the CPU otherwise. Returns this rank's device."""
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    ranks_here = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    if not dist.is_initialized():
        wants_gpu = device is None or torch.device(device).type == "cuda"
        on_gpu = wants_gpu and torch.cuda.is_available() and ranks_here <= torch.cuda.device_count()
        if on_gpu:
            torch.cuda.set_device(local_rank)
        dist.init_process_group("nccl" if on_gpu else "gloo", timeout=timedelta(minutes=10))
    if torch.cuda.is_available() and dist.get_backend() == "nccl":
        return torch.device("cuda", local_rank)
    return torch.device("cpu")


def report(**fields):
    """One fact for the lesson's checks, tagged with the process that measured it."""
    print("REPORT " + json.dumps({"pid": os.getpid(), **fields}), flush=True)


class Numbered(Dataset):
    """Seeded pairs; each item also gives its index, so the lesson can show who read which sample."""

    def __init__(self, size=256, features=8):
        generator = torch.Generator().manual_seed(0)
        self.x = torch.randn(size, features, generator=generator)
        self.y = self.x.sum(dim=1, keepdim=True) + 0.5 * torch.randn(size, 1, generator=generator)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, index):
        return index, self.x[index], self.y[index]


def main():
    device = ddp_setup()
    torch.manual_seed(0)
    data = Numbered()
    loader = DataLoader(data, batch_size=16, sampler=DistributedSampler(data, shuffle=True))
    model = nn.Linear(8, 1).to(device)
    model = DDP(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    for epoch in range(2):
        loader.sampler.set_epoch(epoch)
        seen = []
        for index, x, y in loader:
            seen += index.tolist()
            loss = nn.functional.mse_loss(model(x.to(device)), y.to(device))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        if int(os.environ.get("RANK", "0")) == 0:
            print(f"epoch {epoch}: loss {loss.item():.4f}")
        report(epoch=epoch, indices=seen, dataset_size=len(data))
    if int(os.environ.get("RANK", "0")) == 0:
        torch.save(model.module.state_dict(), os.path.join(os.environ.get("MGTUTOR_RUN_DIR", "."), "single_gpu.pt"))
    report(weight_sum=round(float(sum(p.sum() for p in model.parameters())), 6))


if __name__ == "__main__":
    try:
        main()
        dist.barrier()
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
