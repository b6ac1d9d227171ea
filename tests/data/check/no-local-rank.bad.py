"""env:// path that never reads LOCAL_RANK: .cuda() and DDP without device_ids put every rank on GPU 0."""
import argparse
import os

import torch
import torch.distributed as dist
import torch.nn as nn

parser = argparse.ArgumentParser()
parser.add_argument("--gpu", type=int, default=None)
args = parser.parse_args()

dist.init_process_group(backend="nccl", init_method="env://", rank=int(os.environ["RANK"]),
                        world_size=int(os.environ["WORLD_SIZE"]))
model = nn.Linear(10, 5)
if args.gpu is not None:
    torch.cuda.set_device(args.gpu)
    model.cuda(args.gpu)
    model = nn.parallel.DistributedDataParallel(model, device_ids=[args.gpu])
else:
    model.cuda()
    model = nn.parallel.DistributedDataParallel(model)
