"""Lesson 11: torch.compile on a DDP model: same results, compiled kernels, measured.

    torchrun --nproc-per-node 2 example.py                    add --measure on GPUs
On CPU it compiles with the light "aot_eager" backend so it finishes in seconds;
--compile-backend inductor gives the real code generation (needs a C++ compiler on CPU).
"""
import argparse
import gc
import json
import os
import time
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
    # 5 min, not the 1 min of the other lessons: the first step compiles, and a rank that finishes
    # compiling early waits in the first all-reduce for the slowest one.
    dist.init_process_group(backend=backend, timeout=timedelta(minutes=5))
    return dist.get_rank(), dist.get_world_size(), local_rank, device


def make_model(hidden, device, local_rank):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, hidden), nn.GELU(), nn.LayerNorm(hidden), nn.Linear(hidden, hidden),
                          nn.GELU(), nn.LayerNorm(hidden), nn.Linear(hidden, 10)).to(device)
    # Wrap in DDP first, then compile the wrapper: DDP's bucketing and compile cooperate this way.
    return DDP(model, device_ids=[local_rank] if device.type == "cuda" else None)


def run(model, x, y, steps, device):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(steps + 1):
        if step == 1:  # step 0 includes the compilation
            if device.type == "cuda":
                torch.cuda.synchronize()
            start = time.perf_counter()
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return steps * len(x) / (time.perf_counter() - start)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--measure", action="store_true")
    parser.add_argument("--compile-backend", default=None, help="default: inductor on GPUs, aot_eager on CPU")
    args = parser.parse_args()
    rank, world, local_rank, device = setup()
    try:
        backend = args.compile_backend or ("inductor" if device.type == "cuda" else "aot_eager")
        hidden, batch = (2048, 512) if args.measure else (32, 16)

        eager = make_model(hidden, device, local_rank)
        compiled = torch.compile(make_model(hidden, device, local_rank), backend=backend)
        torch.manual_seed(rank)
        x = torch.randn(batch, 256, device=device)
        y = torch.randint(0, 10, (batch,), device=device)
        start = time.perf_counter()
        with torch.no_grad():
            same = torch.allclose(eager(x), compiled(x), rtol=1e-3, atol=1e-4)
        compile_s = time.perf_counter() - start
        print(f"rank {rank}: compiled with {backend} in {compile_s:.1f} s, same outputs as eager: {same}")
        fields = dict(compile_backend=backend, matches_eager=bool(same), compile_seconds=round(compile_s, 2))
        steps = 50 if args.measure else 3
        compiled_rate = run(compiled, x, y, steps, device)
        if args.measure:
            eager_rate = run(eager, x, y, steps, device)
            fields.update(eager_samples_per_s=round(eager_rate * world),
                          compiled_samples_per_s=round(compiled_rate * world),
                          compile_speedup=round(compiled_rate / eager_rate, 2))
            if rank == 0:
                print(f"eager {eager_rate * world:,.0f} vs compiled {compiled_rate * world:,.0f} samples/s "
                      f"({compiled_rate / eager_rate:.2f}x)")
        checksum = sum(p.detach().double().sum().item() for p in compiled.parameters())
        report(rank=rank, param_checksum=round(checksum, 6), **fields)
        # all ranks finish before any tears down: an early exit can abort a peer's last collective
        dist.barrier(device_ids=[local_rank] if device.type == "cuda" else None)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
    # Free DDP's and gloo's last work objects while Python is fully alive: left to the exit, they can
    # abort the process after a successful run ("terminate called without an active exception").
    gc.collect()
