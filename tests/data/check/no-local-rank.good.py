"""The same shape, but the GPU comes from LOCAL_RANK."""
import os

import torch
import torch.distributed as dist
import torch.nn as nn

local_rank = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local_rank)
dist.init_process_group(backend="nccl")
model = nn.Linear(10, 5)
model.cuda()
model = nn.parallel.DistributedDataParallel(model)
