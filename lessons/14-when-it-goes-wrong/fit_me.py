"""Lesson 14, GPU: a plain DDP training script that asks for far more images per GPU than fit.

    mgtutor fit -- fit_me.py --batch-size 8192      (finds the batch that fits, from outside the script)

Nothing in it knows about mgtutor: --batch-size is its per-GPU batch, --grad-accum its gradient
accumulation, and it trains --steps optimizer steps on random 224x224 images in bf16.
"""
import argparse
import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, default=8192, help="images per GPU")
    parser.add_argument("--grad-accum", type=int, default=1, help="batches per optimizer step")
    parser.add_argument("--steps", type=int, default=100)
    args = parser.parse_args()
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl")
    try:
        net = nn.Sequential(nn.Conv2d(3, 64, 3, padding=1), nn.ReLU(), nn.Conv2d(64, 64, 3, padding=1), nn.ReLU(),
                            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10))
        model = DistributedDataParallel(net.cuda(), device_ids=[local_rank])
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        for _step in range(args.steps):
            for _micro in range(args.grad_accum):
                images = torch.randn(args.batch_size, 3, 224, 224, device="cuda")
                labels = torch.randint(0, 10, (args.batch_size,), device="cuda")
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    loss = nn.functional.cross_entropy(model(images), labels) / args.grad_accum
                loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        dist.barrier(device_ids=[local_rank])
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
