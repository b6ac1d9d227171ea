"""The DDP training worker: `torchrun --nproc-per-node 2 -m mgtutor.training.worker.train [options]`.

Every rank emits events (training/runs/events/writer.py) — start, rendezvous, step, epoch, checkpoint, result,
error — and rank 0 prints human lines. The backend comes from MGTUTOR_BACKEND (set by mgtutor's
launcher), else NCCL when CUDA is available, else gloo. `--inject MODE` makes a real failure happen.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from mgtutor.training.foundation.i18n import _, in_language, inherited_language
from mgtutor.training.worker.trainer import inject
from mgtutor.training.runs.events.writer import EventWriter
from mgtutor.training.worker.trainer.loop import TrainLoop
from mgtutor.training.worker.batch.maxbatch import choose_batch
from mgtutor.training.runs.launch.train_options import add_train_options, check_train_options, cuda_graphs_choice

BACKEND_ENV = "MGTUTOR_BACKEND"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m mgtutor.training.worker.train",
        description="Train a CNN with DDP (one process per device, started by torchrun).",
        epilog="example: torchrun --nproc-per-node 2 -m mgtutor.training.worker.train --model resnet18 --steps 200")
    add_train_options(parser)
    args = parser.parse_args(argv)
    problem = check_train_options(args)
    if problem:
        parser.exit(2, f"{parser.prog}: error: {problem}\n")
    return args


def pick_backend() -> str:
    chosen = os.environ.get(BACKEND_ENV)
    if chosen in ("nccl", "gloo"):
        return chosen
    return "nccl" if torch.cuda.is_available() else "gloo"


def pick_device(backend: str, strategy: str, local_rank: int) -> torch.device:
    """NCCL ranks own one GPU each; a gloo rank stays on the CPU (that is what gloo is for here)."""
    if not torch.cuda.is_available() or backend == "gloo":
        return torch.device("cpu")
    if strategy == "ddp":
        torch.cuda.set_device(local_rank)  # before init: a rank that forgets this lands on GPU 0
        return torch.device("cuda", local_rank)
    return torch.device("cuda", 0)


def join(args: argparse.Namespace, backend: str, rank: int, world_size: int, events: EventWriter) -> None:
    """init_process_group with a short timeout and a barrier, so a missing rank fails the run in
    --init-timeout seconds with PyTorch's own timeout error instead of hanging for 10–30 minutes."""
    os.environ.setdefault("TORCH_DIST_INIT_BARRIER", "1")  # NCCL's init is lazy: wait for every rank here
    if args.cuda_graphs:
        os.environ.setdefault("TORCH_NCCL_ASYNC_ERROR_HANDLING", "0")  # required for capturing NCCL calls
    began = time.time()
    dist.init_process_group(backend, timeout=timedelta(seconds=args.init_timeout))
    events.emit("rendezvous", waited_s=round(time.time() - began, 3), world_size=dist.get_world_size(),
                backend=backend)


def indices_path(rank: int) -> Path:
    folder = Path(os.environ.get("MGTUTOR_RUN_DIR") or ".")
    return folder / f"indices.rank{rank}.json"


def main(argv: list[str] | None = None) -> int:
    inherited_language()
    args = parse_args(argv)
    rank = int(os.environ.get("RANK", "0"))
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if args.strategy != "ddp" and world_size > 1:
        print(f"error: --strategy {args.strategy} runs as one process; start it with --nproc 1", file=sys.stderr)
        return 2
    events = EventWriter.from_env(rank)
    backend = pick_backend()
    device = pick_device(backend, args.strategy, local_rank)
    targeted = args.inject is not None and rank == args.inject_rank
    # auto settles here, where the device is known; everything after sees a plain True/False
    with in_language("en"):  # the start event keeps the English reason; rank 0 prints it in the user's
        graphs, graphs_why = cuda_graphs_choice(args, device.type == "cuda")
    said_why = cuda_graphs_choice(args, device.type == "cuda")[1]
    args.cuda_graphs = graphs
    events.emit("start", pid=os.getpid(), host=os.uname().nodename, local_rank=local_rank, world_size=world_size,
                backend=backend if args.strategy == "ddp" else None, device=str(device), model=args.model,
                data=args.data, strategy=args.strategy, batch_size=args.batch_size, torch=torch.__version__,
                inject=args.inject, inject_rank=args.inject_rank if args.inject else None,
                cuda_graphs=args.cuda_graphs, cuda_graphs_why=graphs_why)
    if rank == 0:
        print(_("cuda graphs: {why}").format(why=said_why), flush=True)
    loop: TrainLoop | None = None
    try:
        if args.inject == "hang-before-init" and targeted:
            print(f"rank {rank}: --inject hang-before-init: never calling init_process_group", flush=True)
            inject.hang_before_init()
        if args.strategy == "ddp":
            join(args, backend, rank, world_size, events)
        if args.batch_size == "auto":  # every rank searches with the others, then trains at the answer
            args.batch_size = choose_batch(args, rank, world_size, device, events)
        loop = TrainLoop(args, rank, world_size, device, events)
        result = loop.run()
        if args.record_indices:
            indices_path(rank).write_text(json.dumps(loop.used_indices))
        events.emit("result", **result)
        if rank == 0:
            print(summary_line(result, world_size), flush=True)
        return 0
    except BaseException as exc:
        if loop:
            try:
                loop.report_landed()  # the windows logged before the failure keep their step events
            except Exception:  # a NaN window or a broken device must not hide the real error
                pass
        events.emit("error", error=f"{type(exc).__name__}: {exc}", exception=type(exc).__name__,
                    step=loop.step if loop else None)
        if isinstance(exc, Exception) and world_size > 1 and dist.is_available() and dist.is_initialized():
            # Leave at once: destroy_process_group would wait on peers still inside a collective, and
            # the rank that failed first must also be the first to exit, so the record names it.
            sys.excepthook(type(exc), exc, exc.__traceback__)
            sys.stdout.flush()
            sys.stderr.flush()
            events.close()
            os._exit(1)
        raise
    finally:
        events.close()
        if loop:
            try:
                loop.close()
            except Exception:  # a broken device must not hide the real error
                pass
        if dist.is_available() and dist.is_initialized():
            try:
                dist.destroy_process_group()
            except Exception:  # a broken group must not hide the real error
                pass


def summary_line(result: dict[str, Any], world_size: int) -> str:
    return _("done: {steps} steps, final loss {loss:.4f}, {rate:,.0f} samples/s on rank 0 (×{ranks} ranks), peak "
             "memory {peak:.0f} MiB").format(steps=result["steps"], loss=result["final_loss"],
                                             rate=result["samples_per_s"], ranks=world_size, peak=result["mem_peak_mib"])


if __name__ == "__main__":
    code = main()
    # Free DDP's and gloo's last work objects while Python is fully alive: left to the exit, they can
    # abort the process after a successful run ("terminate called without an active exception").
    gc.collect()
    sys.exit(code)
