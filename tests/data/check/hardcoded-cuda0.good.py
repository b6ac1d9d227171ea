import os
import torch
import torch.distributed as dist

dist.init_process_group("nccl")
device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
model = torch.nn.Linear(4, 4).to(device)
