"""The same setup with the CPU branch: GPUs when there are some, gloo on the CPU otherwise."""
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")
    dist.init_process_group(backend="nccl" if torch.cuda.is_available() else "gloo")
    model = DDP(torch.nn.Linear(8, 2).to(device), device_ids=[local_rank] if device.type == "cuda" else None)
    model(torch.randn(4, 8, device=device)).sum().backward()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
