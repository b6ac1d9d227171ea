"""`not distributed or rank == 0`: the first half is false whenever the job is distributed."""
import os

import torch
import torch.distributed as dist

distributed = "WORLD_SIZE" in os.environ
if distributed:
    dist.init_process_group("gloo")
state = {"w": torch.zeros(3)}
if not distributed or dist.get_rank() == 0:
    torch.save(state, "checkpoint.pth.tar")
