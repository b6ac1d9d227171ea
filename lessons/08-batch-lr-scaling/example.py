"""Lesson 8: global batch, learning-rate scaling, warm-up, and gradient accumulation with no_sync.

    torchrun --nproc-per-node 2 example.py --accum 4
"""
import argparse
import contextlib
import gc
import json
import os
from datetime import timedelta

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP


def report(**fields):
    print("REPORT " + json.dumps(fields), flush=True)


def setup():
    backend = os.environ.get("MGTUTOR_BACKEND") or ("nccl" if torch.cuda.is_available() else "gloo")
    local_rank = int(os.environ["LOCAL_RANK"])
    if backend == "nccl":
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")
    dist.init_process_group(backend=backend, timeout=timedelta(seconds=60))
    return dist.get_rank(), dist.get_world_size(), local_rank, device


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, default=8, help="per rank, per micro-step")
    parser.add_argument("--accum", type=int, default=4, help="micro-steps per optimizer step")
    parser.add_argument("--base-lr", type=float, default=0.1, help="the lr that worked for --base-batch")
    parser.add_argument("--base-batch", type=int, default=32)
    parser.add_argument("--warmup", type=int, default=4, help="optimizer steps of linear warm-up")
    parser.add_argument("--updates", type=int, default=6)
    args = parser.parse_args()
    rank, world, local_rank, device = setup()
    try:

        global_batch = args.batch_size * world * args.accum
        lr = args.base_lr * global_batch / args.base_batch  # linear scaling rule
        if rank == 0:
            print(f"global batch {args.batch_size} x {world} ranks x {args.accum} micro-steps = {global_batch}; "
                  f"lr {args.base_lr} x {global_batch}/{args.base_batch} = {lr:g}")

        torch.manual_seed(0)
        model = DDP(nn.Linear(32, 4).to(device), device_ids=[local_rank] if device.type == "cuda" else None)
        syncs = {"count": 0}

        def counting_allreduce(state, bucket):  # counts gradient all-reduces, then does the usual one
            syncs["count"] += 1
            return default_hooks.allreduce_hook(state, bucket)

        model.register_comm_hook(None, counting_allreduce)
        optimizer = torch.optim.SGD(model.parameters(), lr=lr)
        warmup = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / args.warmup))

        torch.manual_seed(100 + rank)
        lrs = []
        for update in range(args.updates):
            lrs.append(optimizer.param_groups[0]["lr"])
            for micro in range(args.accum):
                x = torch.randn(args.batch_size, 32, device=device)
                last = micro == args.accum - 1
                # Only the last micro-step all-reduces; the others just add to .grad locally.
                with contextlib.nullcontext() if last else model.no_sync():
                    loss = model(x).pow(2).mean() / args.accum
                    loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            warmup.step()
        checksum = sum(p.detach().double().sum().item() for p in model.parameters())
        if rank == 0:
            print("lr per update: " + ", ".join(f"{v:.3f}" for v in lrs))
            print(f"{syncs['count']} gradient all-reduces for {args.updates} updates")
        report(rank=rank, global_batch=global_batch, scaled_lr=lr, lr_first=lrs[0], lr_peak=max(lrs), lrs=lrs,
               syncs_per_update=syncs["count"] / args.updates, param_checksum=round(checksum, 6))
        # all ranks finish before any tears down: an early exit can abort a peer's last collective
        dist.barrier(device_ids=[local_rank] if device.type == "cuda" else None)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
    # Free DDP's and gloo's last work objects while Python is fully alive: left to the exit, they can
    # abort the process after a successful run ("terminate called without an active exception").
    gc.collect()
