"""A plain training script with no mgtutor import, two ranks on gloo (CPU): each rank trains a model of its
own (no DDP, so no all-reduce holds rank 0 back), rank 1 stops stepping after 3 steps and waits at a
barrier while rank 0 goes on for STEPS steps of about 50 ms; then both leave the barrier and end.
Under `mgtutor run --nproc 2` the live warning names rank 1 (tests/test_rank_hook_run.py)."""
import os
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

STEPS = int(os.environ.get("PLAIN_RANK_STOPS_STEPS", "160"))
RANK1_STEPS = 3
BATCH = 8


def main() -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    steps = STEPS if rank == 0 else RANK1_STEPS
    torch.manual_seed(rank)
    data = TensorDataset(torch.randn(steps * BATCH, 16), torch.randint(0, 4, (steps * BATCH,)))
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    for inputs, labels in DataLoader(data, batch_size=BATCH):
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(inputs), labels)
        loss.backward()
        optimizer.step()
        time.sleep(0.05)
    print(f"rank {rank}: {steps} steps done, waiting at the barrier", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
