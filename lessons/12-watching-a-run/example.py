"""Lesson 12: look inside a DDP step with the PyTorch profiler: compute vs communication.

    torchrun --nproc-per-node 2 example.py         NCCL_DEBUG=INFO torchrun ... to see NCCL set itself up
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
from torch.profiler import ProfilerActivity, profile, record_function


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
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--trace", default=None, help="also write a Chrome trace here (open in Perfetto)")
    args = parser.parse_args()
    rank, world, local_rank, device = setup()
    try:
        cuda = device.type == "cuda"
        hidden = 2048 if cuda else 64
        model = DDP(nn.Sequential(nn.Linear(256, hidden), nn.ReLU(), nn.Linear(hidden, 10)).to(device),
                    device_ids=[local_rank] if cuda else None)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        x = torch.randn(64, 256, device=device)
        y = torch.randint(0, 10, (64,), device=device)

        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
        with profile(activities=activities) as prof:
            for _ in range(args.steps):
                with record_function("train_step"):
                    loss = nn.functional.cross_entropy(model(x), y)
                    optimizer.zero_grad(set_to_none=True)
                    loss.backward()
                    optimizer.step()
            if cuda:
                torch.cuda.synchronize()
        events = prof.key_averages()
        names = [e.key for e in events]
        comm = [n for n in names if "all_reduce" in n or "allreduce" in n.lower() or n.startswith("nccl")]
        if rank == 0:
            sort = "cuda_time_total" if cuda else "cpu_time_total"
            print(events.table(sort_by=sort, row_limit=12))
            print("communication seen by the profiler:", ", ".join(sorted(set(comm))[:6]))
            if cuda:
                used = torch.cuda.max_memory_allocated() / 2**20
                print(f"peak memory on cuda:{local_rank}: {used:.0f} MiB")
            if args.trace:
                prof.export_chrome_trace(args.trace)
        report(rank=rank, profiled_ops=len(names), saw_allreduce=bool(comm), comm_ops=sorted(set(comm))[:6],
               nccl_kernels=any("nccl" in n.lower() for n in names))
        # all ranks finish before any tears down: an early exit can abort a peer's last collective
        dist.barrier(device_ids=[local_rank] if device.type == "cuda" else None)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
    # Free DDP's and gloo's last work objects while Python is fully alive: left to the exit, they can
    # abort the process after a successful run ("terminate called without an active exception").
    gc.collect()
