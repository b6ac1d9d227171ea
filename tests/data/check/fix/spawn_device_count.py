"""One process per GPU with mp.spawn, in the shape of the DDP tutorial series' multigpu.py: the world size is
torch.cuda.device_count(), the batch is split by it, everything goes to .cuda(rank). On a machine without a
GPU it starts no process at all and exits 0, having done nothing. Written for mgtutor's check --fix tests."""
import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP


def main(rank, world_size, total_batch):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    dist.init_process_group("nccl", rank=rank, world_size=world_size)
    torch.cuda.set_device(rank)
    model = DDP(torch.nn.Linear(4, 1).cuda(rank), device_ids=[rank])
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    batch = total_batch // world_size
    for step in range(3):
        x = torch.randn(batch, 4).cuda()
        loss = model(x).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"rank {rank} of {world_size} trained 3 steps of {batch}")
    dist.destroy_process_group()


if __name__ == "__main__":
    os.environ["MASTER_PORT"] = os.environ.get("SPAWN_PORT", "29517")
    world_size = torch.cuda.device_count()
    mp.spawn(main, args=(world_size, 32), nprocs=world_size)
