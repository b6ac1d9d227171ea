"""The seed article's DDP setup: every CUDA call unconditional, so a CPU-only machine fails at set_device."""
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def setup():
    local_rank = int(os.environ["LOCAL_RANK"])
    dist.init_process_group(backend="gloo")
    torch.cuda.set_device(local_rank)
    return local_rank


def main():
    local_rank = setup()
    model = torch.nn.Linear(8, 2).cuda()
    model = DDP(model, device_ids=[local_rank])
    x = torch.randn(4, 8).to(local_rank)
    model(x).sum().backward()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
