"""Lesson 13: measure all-reduce bandwidth (algbw and busbw, as nccl-tests define them).

    torchrun --nproc-per-node 2 example.py
"""
import argparse
import gc
import json
import os
import time
from datetime import timedelta

import torch
import torch.distributed as dist


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


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--max-mib", type=float, default=None, help="largest message (default 1024 GPU, 1 CPU)")
    parser.add_argument("--iters", type=int, default=None)
    args = parser.parse_args()
    rank, world, local_rank, device = setup()
    try:
        cuda = device.type == "cuda"
        max_bytes = int((args.max_mib or (1024 if cuda else 1)) * 2**20)
        iters = args.iters or (20 if cuda else 5)

        # Correctness first: every rank contributes rank+1; the sum must be 1+2+…+world everywhere.
        probe = torch.full((4,), float(rank + 1), device=device)
        dist.all_reduce(probe)
        correct = bool(torch.all(probe == world * (world + 1) / 2))

        rows, size = [], 4 * 1024
        while size <= max_bytes:
            tensor = torch.ones(size // 4, dtype=torch.float32, device=device)
            for _ in range(3):  # warm-up: NCCL sets up its channels on the first calls
                dist.all_reduce(tensor)
            sync(device)
            dist.barrier()
            start = time.perf_counter()
            for _ in range(iters):
                dist.all_reduce(tensor)
            sync(device)
            seconds = (time.perf_counter() - start) / iters
            algbw = size / seconds / 1e9
            busbw = algbw * 2 * (world - 1) / world  # what each link carried: comparable across world sizes
            rows.append({"bytes": size, "us": round(seconds * 1e6, 1), "algbw_gbps": round(algbw, 3),
                         "busbw_gbps": round(busbw, 3)})
            size *= 4
        peer = bool(torch.cuda.can_device_access_peer(0, 1)) if cuda and torch.cuda.device_count() > 1 else None
        if rank == 0:
            print(f"all-reduce on {world} ranks, backend {dist.get_backend()}, P2P between GPU 0 and 1: {peer}")
            print(f"{'size':>12} {'time us':>10} {'algbw GB/s':>11} {'busbw GB/s':>11}")
            for row in rows:
                print(f"{row['bytes']:>12,} {row['us']:>10} {row['algbw_gbps']:>11} {row['busbw_gbps']:>11}")
        report(rank=rank, sum_correct=correct, rows=rows, peak_busbw_gbps=max(r["busbw_gbps"] for r in rows),
               backend=dist.get_backend(), p2p=peer)
        # all ranks finish before any tears down: an early exit can abort a peer's last collective
        dist.barrier(device_ids=[local_rank] if device.type == "cuda" else None)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
    # Free DDP's and gloo's last work objects while Python is fully alive: left to the exit, they can
    # abort the process after a successful run ("terminate called without an active exception").
    gc.collect()
