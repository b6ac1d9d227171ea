"""Loads weights someone else saved: whether they hold GPU tensors cannot be told from here."""
import datetime
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel


def main():
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo",
                            timeout=datetime.timedelta(minutes=5))
    model = torch.nn.Linear(8, 2)
    model.load_state_dict(torch.load("pretrained.pt"))
    return DistributedDataParallel(model.cuda(), device_ids=[local_rank])


if __name__ == "__main__":
    main()
