"""The launcher decides the GPUs; each rank takes the one its local rank names."""
import os

import torch
import torch.distributed as dist

dist.init_process_group("nccl")
local_rank = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local_rank)
