"""Lesson 15: what each process learns from torchrun about its place in a multi-node job.

    one node:   torchrun --nproc-per-node 2 example.py
    two nodes:  torchrun --nnodes 2 --nproc-per-node 4 --rdzv-backend c10d \
                    --rdzv-endpoint HOST0:29500 --rdzv-id job1 example.py     (same line on every node)
"""
import gc
import json
import os
import socket
from datetime import timedelta

import torch
import torch.distributed as dist


def report(**fields):
    print("REPORT " + json.dumps(fields), flush=True)


def main():
    backend = os.environ.get("MGTUTOR_BACKEND") or ("nccl" if torch.cuda.is_available() else "gloo")
    local_rank = int(os.environ["LOCAL_RANK"])
    if backend == "nccl":
        torch.cuda.set_device(local_rank)
    dist.init_process_group(backend=backend, timeout=timedelta(seconds=60))
    rank, world = dist.get_rank(), dist.get_world_size()
    try:
        node = int(os.environ.get("GROUP_RANK", os.environ.get("NODE_RANK", "0")))
        per_node = int(os.environ["LOCAL_WORLD_SIZE"])
        where = {"rank": rank, "local_rank": local_rank, "node": node, "host": socket.gethostname()}
        everyone = [None] * world
        dist.all_gather_object(everyone, where)  # every rank learns where every other rank runs
        if rank == 0:
            for entry in everyone:
                print(f"rank {entry['rank']:>3}  node {entry['node']}  "
                      f"local_rank {entry['local_rank']}  {entry['host']}")
        report(rank=rank, local_rank=local_rank, node=node, local_world_size=per_node, world_size=world,
               rank_formula_ok=rank == node * per_node + local_rank,
               master=f"{os.environ.get('MASTER_ADDR')}:{os.environ.get('MASTER_PORT')}",
               ranks_known=sorted(e["rank"] for e in everyone) == list(range(world)))
        # all ranks finish before any tears down: an early exit can abort a peer's last collective
        dist.barrier(device_ids=[local_rank] if backend == "nccl" else None)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
    # Free DDP's and gloo's last work objects while Python is fully alive: left to the exit, they can
    # abort the process after a successful run ("terminate called without an active exception").
    gc.collect()
