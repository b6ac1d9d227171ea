"""The batch finder's worker: `torchrun --nproc-per-node N -m mgtutor.training.worker.batch.maxbatch --model M …`.

Every rank searches with the others (training/worker/batch/batchfind.py), then trains `--prove-steps`
steps at the chosen batch to show that it holds. Rank 0 prints each trial as it ends and writes
the trials and the answer as events; `mgtutor bench maxbatch` reads them. `mgtutor train
--batch-size auto` runs the same search inside the trainer (`choose_batch`) before it trains.
"""
from __future__ import annotations

import argparse
import gc
import os
import sys
import time
from collections.abc import Callable
from datetime import timedelta

import torch
import torch.distributed as dist

from mgtutor.training.runs.events.writer import EventWriter
from mgtutor.training.runs.launch.train_options import add_train_options
from mgtutor.training.worker.batch.batchfind import BatchFinder, Search, is_oom
from mgtutor.training.runs.batchfit import split_global

_SKIP = ("--strategy", "--inject", "--inject-rank", "--inject-step", "--slow-seconds", "--resume",
         "--checkpoint-dir", "--checkpoint-every", "--record-indices", "--batch-size", "--steps", "--epochs")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m mgtutor.training.worker.batch.maxbatch",
                                     description="Find the largest batch that trains on every rank.")
    add_train_options(parser, skip=_SKIP)
    add_finder_options(parser)
    parser.add_argument("--prove-steps", type=int, default=20, metavar="N",
                        help="steps trained at the chosen batch to show it holds (default 20; 0 skips)")
    parser.add_argument("--global-batch", type=int, default=None, metavar="G",
                        help="also say which per-rank batch × gradient accumulation reaches G samples per step")
    parser.add_argument("--share-gpu", action="store_true",
                        help="every rank on GPU 0 (as when ranks forget set_device): they must agree on a batch "
                             "that fits them all at once")
    return parser.parse_args(argv)


def add_finder_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--margin", type=float, default=5.0, metavar="PCT",
                        help="memory kept free below the measured maximum, in %% of the GPU memory a rank can use "
                             "(default 5: the allocator's fragmentation over a long run, NCCL's buffers, DDP's "
                             "buckets)")
    parser.add_argument("--max-batch", type=int, default=None, metavar="B", help="never try a batch above B")


def agreement_group(world_size: int) -> dist.ProcessGroup | None:
    """A gloo group for the finder's agreement; None: the default group (already gloo, or one rank alone)."""
    if world_size == 1 or not dist.is_initialized():
        return None
    if dist.get_backend() == "gloo":
        return None  # the default group already is gloo
    group = dist.new_group(backend="gloo")
    return group if isinstance(group, dist.ProcessGroup) else None


def report(search: Search, say: Callable[[str], None]) -> None:
    line = search.line
    assert line is not None
    predicted = " → ".join(map(str, search.predictions)) or str(search.predicted)
    say(f"batch finder: measured maximum {search.measured_max} (predicted {predicted}); chosen batch "
        f"{search.chosen} per rank after the margin; {line.per_sample_bytes / 2**20:.2f} MiB per sample, "
        f"{line.fixed_bytes / 2**30:.2f} GiB fixed (weights, gradients, optimizer state); "
        f"{len(search.trials)} trials in {search.seconds:.1f} s")


def result_fields(search: Search, args: argparse.Namespace, world_size: int) -> dict:
    assert search.line is not None
    return {"kind": "maxbatch", "chosen_batch": search.chosen, "measured_max": search.measured_max,
            "predicted": search.predicted, "predictions": search.predictions,
            "fixed_bytes": int(search.line.fixed_bytes),
            "per_sample_bytes": int(search.line.per_sample_bytes), "budget_bytes": min(search.budgets),
            "budgets_bytes": search.budgets, "margin_pct": float(args.margin), "seconds": round(search.seconds, 3),
            "world_size": world_size, "model": args.model, "image_size": args.image_size, "amp": args.amp,
            "trials": [t.to_json() for t in search.trials]}


def choose_batch(args: argparse.Namespace, rank: int, world_size: int, device: torch.device,
                 events: EventWriter) -> int:
    """`mgtutor train --batch-size auto`: search with the other ranks, then train at the answer."""
    for name, default in (("margin", 5.0), ("max_batch", None)):
        if not hasattr(args, name):
            setattr(args, name, default)
    if args.data == "synthetic":  # an epoch must hold one step per rank at least
        args.max_batch = min(args.max_batch or 1 << 40, args.dataset_size // (world_size * args.grad_accum))
    finder = BatchFinder(args, rank, world_size, device, agreement_group(world_size), _say)
    search = finder.find()
    finder.close()
    del finder
    gc.collect()
    _emit(events, rank, search)
    if rank == 0:
        report(search, _say)
        events.emit("result", **result_fields(search, args, world_size), proved_steps=0)
    return search.chosen


def _say(text: str) -> None:
    print(text, flush=True)


def _emit(events: EventWriter, rank: int, search: Search) -> None:
    if rank == 0:
        for trial in search.trials:
            events.emit("step", kind="maxbatch", **trial.to_json())


def pick_device(args: argparse.Namespace, local_rank: int) -> torch.device:
    if not torch.cuda.is_available():
        return torch.device("cpu")
    index = 0 if args.share_gpu else local_rank
    torch.cuda.set_device(index)
    return torch.device("cuda", index)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    rank, world_size = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    events = EventWriter.from_env(rank)
    device = pick_device(args, int(os.environ.get("LOCAL_RANK", "0")))
    events.emit("start", pid=os.getpid(), host=os.uname().nodename, world_size=world_size, backend="gloo",
                device=str(device), model=args.model, role="maxbatch")
    try:
        if world_size > 1:
            dist.init_process_group("gloo", timeout=timedelta(seconds=args.init_timeout))
            events.emit("rendezvous", waited_s=0.0, world_size=world_size, backend="gloo")
        finder = BatchFinder(args, rank, world_size, device, agreement_group(world_size), _say)
        search = finder.find()
        _emit(events, rank, search)
        if rank == 0:
            report(search, _say)
        proved = prove(finder, search, args)
        fields = result_fields(search, args, world_size)
        if args.global_batch:
            split = split_global(args.global_batch, world_size, search.chosen)
            fields["split"] = split.to_json()
            if rank == 0:
                exact = "" if split.global_batch == args.global_batch else \
                    f" (the closest below {args.global_batch} that divides evenly)"
                _say(f"batch finder: global batch {split.global_batch}{exact} = {split.per_rank} per rank × "
                     f"{split.accumulation} accumulation step(s) × {world_size} rank(s)")
        if rank == 0:
            events.emit("result", **fields, proved_steps=args.prove_steps, proved=proved)
        finder.close()
        return 0 if proved else 1
    except BaseException as exc:
        events.emit("error", error=f"{type(exc).__name__}: {exc}", exception=type(exc).__name__)
        raise
    finally:
        events.close()
        if dist.is_initialized():
            dist.destroy_process_group()


def prove(finder: BatchFinder, search: Search, args: argparse.Namespace) -> bool:
    """Train `--prove-steps` steps at the chosen batch on every rank; True when none ran out of memory."""
    if args.prove_steps < 1:
        return True
    began = time.perf_counter()
    torch.backends.cudnn.benchmark = finder.device.type == "cuda"  # the trainer's own setting
    ok, peak = True, 0
    try:
        finder.memory.begin(search.chosen)
        finder.step.run(search.chosen, args.prove_steps)
        peak = finder.memory.peak(search.chosen)
    except Exception as exc:
        if not is_oom(exc):
            raise
        ok = False
    finder.memory.release()
    ok = finder.reduce([0 if ok else 1], dist.ReduceOp.MAX)[0] == 0
    peak = finder.reduce([peak], dist.ReduceOp.MAX)[0]
    seconds = time.perf_counter() - began
    finder.say(f"batch finder: proof: {args.prove_steps} steps at batch {search.chosen} "
               f"{'trained, peak ' + format(peak / 2**30, '.2f') + ' GiB' if ok else 'ran out of memory'} "
               f"({seconds:.1f} s)")
    return ok


if __name__ == "__main__":
    code = main()
    gc.collect()
    sys.exit(code)
