"""DDP on both branches; device_ids only on the GPU one."""
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
model = torch.nn.Linear(4, 4)
if torch.cuda.is_available():
    local_rank = int(os.environ["LOCAL_RANK"])
    model = DDP(model.cuda(local_rank), device_ids=[local_rank])
else:
    model = DDP(model)
