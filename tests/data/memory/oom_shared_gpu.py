"""Two ranks that forget `torch.cuda.set_device`: both land on GPU 0. Rank 0 holds a large tensor and
waits; rank 1 allocates until the GPU is full, so its OOM message lists rank 0 as another process."""
import os
from datetime import timedelta

import torch
import torch.distributed as dist

dist.init_process_group("gloo", timeout=timedelta(seconds=120))
rank = dist.get_rank()
free, total = torch.cuda.mem_get_info(0)
if rank == 0:
    held = torch.empty(int(free * 0.5), dtype=torch.uint8, device="cuda:0")  # half of the GPU
    dist.barrier()
    dist.barrier()  # rank 1 never comes back to this one: it died of its OOM
else:
    dist.barrier()
    chunks = []
    while True:
        chunks.append(torch.empty(1 << 30, dtype=torch.uint8, device="cuda:0"))  # 1 GiB at a time
