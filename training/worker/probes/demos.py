"""Tiny rank programs for the failure demos that the trainer cannot produce: a port already in use,
a rank that skips an all-reduce, a world size the script sets itself, a rank whose data loader never
returns. Each makes the real failure happen (run under torchrun).

    python -m mgtutor.training.worker.probes.demos port-in-use    (MGTUTOR_DEMO_PORT = a port someone holds)
    python -m mgtutor.training.worker.probes.demos skip-allreduce [--timeout S] [--skip-rank R]
    python -m mgtutor.training.worker.probes.demos world-size     (asks for one rank more than started)
    python -m mgtutor.training.worker.probes.demos stuck-loader [--skip-rank R]   (R's Dataset sleeps)
"""
from __future__ import annotations

import argparse
import datetime
import gc
import os
import sys
import time

import torch
from torch.utils.data import Dataset


def _backend() -> str:
    chosen = os.environ.get("MGTUTOR_BACKEND")
    return chosen if chosen in ("nccl", "gloo") else ("nccl" if torch.cuda.is_available() else "gloo")


def _device(backend: str) -> torch.device:
    """This rank's GPU on NCCL (made current), else the CPU."""

    if backend != "nccl":
        return torch.device("cpu")
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    torch.cuda.set_device(device)
    return device


def port_in_use(timeout: float) -> int:
    """Like a script with MASTER_PORT hard-coded to a port another job holds: rank 0 must host the
    store there, and the OS refuses (EADDRINUSE)."""
    import torch.distributed as dist

    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = os.environ["MGTUTOR_DEMO_PORT"]
    os.environ.pop("TORCHELASTIC_USE_AGENT_STORE", None)  # host our own store, as a plain script would
    dist.init_process_group("gloo", init_method="env://", timeout=datetime.timedelta(seconds=timeout))
    print("joined (the port was free after all)", flush=True)
    dist.destroy_process_group()
    return 0


def skip_allreduce(timeout: float, skip_rank: int) -> int:
    """Every rank but one enters an all-reduce; the waiting ranks hit the real collective timeout."""
    import torch.distributed as dist

    backend = _backend()
    rank = int(os.environ.get("RANK", "0"))
    device = _device(backend)
    dist.init_process_group(backend, timeout=datetime.timedelta(seconds=timeout))
    tensor = torch.ones(1024, device=device)
    dist.all_reduce(tensor)  # every rank: the group works
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    print(f"rank {rank}: first all-reduce done", flush=True)
    if rank == skip_rank:
        print(f"rank {rank}: skipping the next all-reduce (the bug under study)", flush=True)
        time.sleep(timeout * 6 + 30)
        return 0
    dist.all_reduce(tensor)
    if device.type == "cuda":
        torch.cuda.synchronize(device)  # NCCL is asynchronous: the watchdog reports the timeout
    time.sleep(timeout * 6 + 30)
    return 0


def world_size(timeout: float) -> int:
    """A script that sets WORLD_SIZE itself, one more than torchrun started: every rank waits for a
    peer that never comes, in init_process_group on gloo, in its first collective on NCCL (whose
    init_process_group returns at once and connects the ranks at their first collective)."""
    import torch.distributed as dist

    backend = _backend()
    device = _device(backend)
    os.environ["WORLD_SIZE"] = str(int(os.environ.get("WORLD_SIZE", "1")) + 1)
    dist.init_process_group(backend, timeout=datetime.timedelta(seconds=timeout))
    dist.all_reduce(torch.ones(1, device=device))
    return 0


class _SlowOnOneRank(Dataset[float]):
    """A map-style data set whose items never come on one rank (a dead network disk, a lock)."""

    def __init__(self, stuck_rank: int) -> None:
        self.stuck = int(os.environ.get("RANK", "0")) == stuck_rank

    def __len__(self) -> int:
        return 64

    def __getitem__(self, index: int) -> float:
        if self.stuck:
            time.sleep(3600)
        return float(index)


def stuck_loader(timeout: float, stuck_rank: int) -> int:
    """Rank `stuck_rank` waits for its DataLoader workers; the others wait for it in all_reduce."""
    import torch.distributed as dist
    from torch.utils.data import DataLoader

    backend = _backend()
    device = _device(backend)
    dist.init_process_group(backend, timeout=datetime.timedelta(seconds=timeout))
    for batch in DataLoader(_SlowOnOneRank(stuck_rank), batch_size=8, num_workers=2):
        total = batch.sum().to(device)
        dist.all_reduce(total)
        print(f"rank {dist.get_rank()}: batch sum {total.item():g}", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mgtutor.training.worker.probes.demos")
    parser.add_argument("mode", choices=["port-in-use", "skip-allreduce", "world-size", "stuck-loader"])
    parser.add_argument("--timeout", type=float, default=5.0)
    parser.add_argument("--skip-rank", type=int, default=1)
    args = parser.parse_args(argv)
    if args.mode == "port-in-use":
        return port_in_use(args.timeout)
    if args.mode == "world-size":
        return world_size(args.timeout)
    if args.mode == "stuck-loader":
        return stuck_loader(args.timeout, args.skip_rank)
    return skip_allreduce(args.timeout, args.skip_rank)


if __name__ == "__main__":
    code = main()
    # Free DDP's and gloo's last work objects while Python is fully alive: left to the exit, they can
    # abort the process after a successful run ("terminate called without an active exception").
    gc.collect()
    sys.exit(code)
