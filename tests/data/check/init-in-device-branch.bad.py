import os

import torch
import torch.distributed as dist


def main():
    use_accel = torch.cuda.is_available()
    if use_accel:
        dist.init_process_group("nccl")
        device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
    else:
        device = torch.device("cpu")
    return device
