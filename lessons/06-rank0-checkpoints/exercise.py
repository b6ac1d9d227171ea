"""Lesson 6 exercise: a log that repeats itself and a checkpoint every rank writes. Fix both.

    torchrun --nproc-per-node 2 example.py --out checkpoints
"""
import argparse
import gc
import json
import os
from datetime import timedelta

import torch
import torch.distributed as dist
from torch import nn
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
    parser.add_argument("--out", default=os.environ.get("MGTUTOR_RUN_DIR") or "checkpoints",
                        help="folder for checkpoint.pt")
    parser.add_argument("--steps", type=int, default=6)
    args = parser.parse_args()
    rank, world, local_rank, device = setup()
    try:
        path = os.path.join(args.out, "checkpoint.pt")

        torch.manual_seed(0)
        model = DDP(nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4)).to(device),
                    device_ids=[local_rank] if device.type == "cuda" else None)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        torch.manual_seed(rank)
        for step in range(args.steps):
            x = torch.randn(8, 16, device=device)
            loss = model(x).pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if step % 2 == 0:
                print(f"step {step} loss {loss.item():.4f}")
                report(rank=rank, logged=step)

        os.makedirs(args.out, exist_ok=True)
        torch.save({"model": model.module.state_dict(), "optimizer": optimizer.state_dict(),
                    "step": args.steps}, path)
        print(f"saved {path}")
        report(rank=rank, saved=path)

        state = torch.load(path, map_location=device, weights_only=True)
        matches = all(torch.equal(state["model"][name], tensor)
                      for name, tensor in model.module.state_dict().items())
        print(f"rank {rank} loaded the checkpoint of step {state['step']}: weights match {matches}")
        report(rank=rank, loaded_matches=matches)
        # all ranks finish before any tears down: an early exit can abort a peer's last collective
        dist.barrier(device_ids=[local_rank] if device.type == "cuda" else None)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
    # Free DDP's and gloo's last work objects while Python is fully alive: left to the exit, they can
    # abort the process after a successful run ("terminate called without an active exception").
    gc.collect()
