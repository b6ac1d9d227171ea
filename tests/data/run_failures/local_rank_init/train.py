"""Written for `python -m torch.distributed.launch`, which passed --local_rank: the script joins the process
group only when that argument came (the shape of the older DDP tutorials). torchrun passes no --local_rank."""
import argparse

import torch
import torch.distributed as dist
import torch.nn as nn

parser = argparse.ArgumentParser()
parser.add_argument("--local_rank", type=int, default=-1, help="set by torch.distributed.launch")
args = parser.parse_args()

if args.local_rank != -1:
    dist.init_process_group(backend="gloo", init_method="env://")

model = nn.Linear(8, 2)
model = nn.parallel.DistributedDataParallel(model)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(5):
    optimizer.zero_grad()
    model(torch.randn(4, 8)).pow(2).mean().backward()
    optimizer.step()
if dist.get_rank() == 0:
    print("trained 5 steps")
dist.destroy_process_group()
