"""The backend as a command-line option whose default is NCCL (the shape of many research scripts)."""
import argparse
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

parser = argparse.ArgumentParser()
parser.add_argument("--dist-backend", default="nccl", type=str, help="distributed backend")
parser.add_argument("--epochs", default=2, type=int)
args = parser.parse_args()

dist.init_process_group(backend=args.dist_backend, init_method="env://")
model = DDP(nn.Linear(4, 2))
for epoch in range(args.epochs):
    model(torch.randn(8, 4)).sum().backward()
if int(os.environ["RANK"]) == 0:
    print("done")
dist.destroy_process_group()
