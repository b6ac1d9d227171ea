"""Ranks from the environment; every rank but 0 prints nothing."""
import builtins
import datetime
import os

import torch
import torch.distributed as dist


def init_distributed_device(args):
    args.local_rank = int(os.environ.get("LOCAL_RANK", 0))
    dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo",
                            timeout=datetime.timedelta(minutes=5))
    if dist.get_rank() != 0:
        builtins.print = lambda *a, **k: None
    return torch.device("cuda", args.local_rank)
