"""Loads that are fine: rank 0 only, or a branch that picks the location on purpose, or to the CPU."""
import datetime
import os

import torch
import torch.distributed as dist


def resume(path, gpu):
    if gpu is None:
        return torch.load(path)
    return torch.load(path, map_location=f"cuda:{gpu}")


def resume_branch(path, gpu):
    if gpu is None:
        state = torch.load(path)
    else:
        state = torch.load(path, map_location=f"cuda:{gpu}")
    return state


def main():
    rank = int(os.environ["RANK"])
    dist.init_process_group("gloo", timeout=datetime.timedelta(minutes=5))
    if rank == 0:
        stats = torch.load("stats.pt")
        print(stats)
    state = torch.load("ckpt.pt", map_location="cpu")
    torch.save(state, f"copy-{rank}.pt")
    return resume_branch("ckpt.pt", None)


if __name__ == "__main__":
    main()
