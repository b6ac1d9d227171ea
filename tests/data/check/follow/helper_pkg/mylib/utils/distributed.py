"""Ranks from whichever launcher set them."""
import datetime
import os

import torch
import torch.distributed as dist


def world_info_from_env():
    local_rank = 0
    for name in ("LOCAL_RANK", "SLURM_LOCALID"):
        if name in os.environ:
            local_rank = int(os.environ[name])
            break
    return local_rank


def init_distributed_device(args):
    args.local_rank = world_info_from_env()
    dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo",
                            timeout=datetime.timedelta(minutes=5))
    torch.cuda.set_device(args.local_rank)
    return torch.device("cuda", args.local_rank)
