"""Lesson 3 exercise: this script trains on one device. DataParallel would drive several GPUs from this
one process; make it a DDP script instead, by hand, so that `torchrun --nproc-per-node 2 exercise.py`
trains ONE model on two ranks: each rank reads its own half of the data, and the model ends where a
single process reading the same samples would (the check compares both).

Only main() needs changing. (`mgtutor convert` does this rewrite for you: try it after.)
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

SAMPLES, FEATURES, EPOCHS, BATCH, LR = 512, 16, 2, 16, 0.1


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
    """Seeded pairs; each item also gives its index, so the check can see which samples a rank read."""

    def __init__(self):
        generator = torch.Generator().manual_seed(0)
        self.x = torch.randn(SAMPLES, FEATURES, generator=generator)
        noise = 0.5 * torch.randn(SAMPLES, 1, generator=generator)  # the loss cannot reach 0
        self.y = self.x @ torch.randn(FEATURES, 1, generator=generator) + noise

    def __len__(self):
        return SAMPLES

    def __getitem__(self, index):
        return index, self.x[index], self.y[index]


def make_model():
    torch.manual_seed(0)
    return nn.Linear(FEATURES, 1)


def full_loss(model, data, device):
    with torch.no_grad():
        return nn.functional.mse_loss(model(data.x.to(device)), data.y.to(device)).item()


def one_process_loss(world_size):
    """The check's reference (leave it as it is): one process reading, at every step, the world_size * BATCH
    samples the ranks read together, in DistributedSampler's order (a seeded shuffle that set_epoch
    reshuffles each epoch)."""
    data, model = Numbered(), make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    for epoch in range(EPOCHS):
        order = torch.randperm(SAMPLES, generator=torch.Generator().manual_seed(epoch))
        for start in range(0, SAMPLES, world_size * BATCH):
            index = order[start:start + world_size * BATCH]
            loss = nn.functional.mse_loss(model(data.x[index]), data.y[index])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return full_loss(model, data, torch.device("cpu"))


def main():
    device = ddp_setup()
    data = Numbered()
    loader = DataLoader(data, batch_size=BATCH, sampler=DistributedSampler(data, shuffle=True))
    model = make_model().to(device)
    model = DDP(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    for epoch in range(EPOCHS):
        loader.sampler.set_epoch(epoch)
        seen = []
        for index, x, y in loader:
            seen += index.tolist()
            loss = nn.functional.mse_loss(model(x.to(device)), y.to(device))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        report(epoch=epoch, seen=seen)
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    report(loss=full_loss(model, data, device), one_process_loss=one_process_loss(world_size), samples=SAMPLES)


if __name__ == "__main__":
    try:
        main()
        dist.barrier()
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
