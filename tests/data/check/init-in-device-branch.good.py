import os

import torch
import torch.distributed as dist


def main():
    use_accel = torch.cuda.is_available()
    if use_accel:
        device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
    else:
        device = torch.device("cpu")
    dist.init_process_group("nccl" if use_accel else "gloo")
    if use_accel:
        torch.cuda.set_device(device)
    return device


def setup():
    if torch.cuda.is_available():
        dist.init_process_group("nccl")
    else:
        dist.init_process_group("gloo")
