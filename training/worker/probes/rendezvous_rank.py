"""Rendezvous probe worker: join, init_process_group, one barrier, one all-reduce — nothing else.

    python -m torch.distributed.run --nproc-per-node 2 -m mgtutor.training.worker.probes.rendezvous_rank --timeout 30

Before init_process_group each rank writes `arrived/<rank>` into the rendezvous store and waits
for all of them, so a timeout names exactly the ranks that never arrived (init_process_group's
own timeout says only "timed out"). `--skip-rank R` makes rank R stay away, to see that report.
Every step is an event of type `rendezvous` (phase = arrived | timeout | init | barrier |
allreduce | skipped); exit code 3 means some rank never joined.
"""
from __future__ import annotations

import argparse
import gc
import os
import sys
import time
from datetime import timedelta

from mgtutor.training.runs.events.writer import EventWriter

EXIT_MISSING = 3
STORE_PREFIX = "mgtutor-rendezvous-probe"


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="mgtutor.training.worker.probes.rendezvous_rank")
    p.add_argument("--timeout", type=float, default=60.0)
    p.add_argument("--skip-rank", type=int, action="append", default=[])
    return p.parse_args(argv)


def wait_for_all(store: object, world: int, timeout: float) -> list[int]:
    """Ranks still missing when every rank arrived ([]) or the timeout passed."""
    deadline = time.monotonic() + timeout
    while True:
        missing = [r for r in range(world) if not store.check([f"arrived/{r}"])]  # type: ignore[attr-defined]
        if not missing or time.monotonic() >= deadline:
            return missing
        time.sleep(0.05)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    local = int(os.environ.get("LOCAL_RANK", 0))
    events = EventWriter.from_env(rank)
    where = f"{os.environ.get('MASTER_ADDR', '?')}:{os.environ.get('MASTER_PORT', '?')}"
    if rank in args.skip_rank:
        events.emit("rendezvous", phase="skipped")
        print(f"rank {rank}: told not to join (--skip-rank); waiting to be stopped", flush=True)
        time.sleep(args.timeout * 3 + 60)
        return 0
    import torch
    import torch.distributed as dist

    timeout = timedelta(seconds=args.timeout)
    backend = os.environ.get("MGTUTOR_BACKEND") or ("nccl" if torch.cuda.is_available() else "gloo")
    phase = "store"
    try:
        store, _, _ = next(dist.rendezvous("env://", rank, world, timeout=timeout))
        probe = dist.PrefixStore(STORE_PREFIX, store)
        probe.set(f"arrived/{rank}", str(time.time()))
        events.emit("rendezvous", phase="arrived", store=where)
        missing = wait_for_all(probe, world, args.timeout)
        if missing:
            events.emit("rendezvous", phase="timeout", missing=missing, timeout_s=args.timeout)
            print(f"rank {rank}: ranks {missing} never joined within {args.timeout:g} s (store {where})", flush=True)
            return EXIT_MISSING
        phase = "init"
        device_id = None
        if backend == "nccl":
            device = device_id = torch.device("cuda", local)
            torch.cuda.set_device(device)
        else:
            device = torch.device("cpu")
        dist.init_process_group(backend, store=dist.PrefixStore(STORE_PREFIX + "-pg", store), rank=rank,
                                world_size=world, timeout=timeout, device_id=device_id)
        events.emit("rendezvous", phase="init", backend=backend)
        phase = "barrier"
        dist.barrier(device_ids=[local]) if backend == "nccl" else dist.barrier()
        events.emit("rendezvous", phase="barrier")
        phase = "allreduce"
        value = torch.ones(1, device=device)
        dist.all_reduce(value)
        total = int(value.item())
        events.emit("rendezvous", phase="allreduce", value=total, expected=world)
        print(f"rank {rank}: joined; barrier and all-reduce done (sum {total}, expected {world})", flush=True)
        dist.destroy_process_group()
        return 0 if total == world else 1
    except Exception as exc:  # report the phase that failed, then fail
        events.emit("error", phase=phase, message=f"{type(exc).__name__}: {exc}"[:2000])
        print(f"rank {rank}: {phase} failed: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        return 1


if __name__ == "__main__":
    code = main(sys.argv[1:])
    # Free DDP's and gloo's last work objects while Python is fully alive: left to the exit, they can
    # abort the process after a successful run ("terminate called without an active exception").
    gc.collect()
    sys.exit(code)
