import torch
import torch.distributed as dist

dist.init_process_group("nccl")
device = torch.device("cuda:0")
model = torch.nn.Linear(4, 4).to(device)
