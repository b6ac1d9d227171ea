"""All-reduce bandwidth worker (one per rank, started by torchrun through the launcher).

    python -m torch.distributed.run --nproc-per-node 2 -m mgtutor.training.worker.probes.allreduce --sizes 8,1048576

Measures like NVIDIA nccl-tests: per size, `warmup` untimed calls, then `iters` back-to-back
calls timed with CUDA events (no host sync in between); on GPUs the timed calls are captured
in one CUDA graph so small messages pay no per-call launch cost. algbw = bytes / time,
busbw = algbw · 2(n−1)/n. Out-of-place calls NCCL directly with torch's communicator when it
can (torch has no out-of-place all_reduce); otherwise it is a copy then an in-place call, and
the rows say so. Rank 0 emits one `step` event per size with the rows, and prints them.
"""
from __future__ import annotations

import argparse
import gc
import os
import sys
import time
from typing import Any

from mgtutor.training.worker.probes.allreduce_ops import Collectives, count_wrong, fill
from mgtutor.diagnostics.bench.sizes import DTYPE_SIZES, canonical_dtype, element_count
from mgtutor.training.runs.events.writer import EventWriter

TORCH_DTYPES = {"float": "float32", "half": "float16", "bfloat16": "bfloat16", "double": "float64",
                "int8": "int8", "uint8": "uint8", "int32": "int32", "int64": "int64"}


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="mgtutor.training.worker.probes.allreduce")
    p.add_argument("--sizes", required=True, help="comma-separated message sizes in bytes")
    p.add_argument("--dtype", default="float")
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--check", action="store_true")
    p.add_argument("--graph", choices=("auto", "on", "off"), default="auto")
    p.add_argument("--oop", choices=("auto", "nccl", "copy"), default="auto",
                   help="out-of-place method: NCCL called directly, or copy + in-place all_reduce")
    return p.parse_args(argv)


def bus_factor(world: int) -> float:
    return 2.0 * (world - 1) / world if world > 1 else 0.0


def make_row(size_bytes: int, count: int, dtype: str, time_us: float, world: int, in_place: bool,
             wrong: int | None, graph: bool, method: str) -> dict[str, Any]:
    algbw = size_bytes / (time_us * 1e-6) / 1e9 if time_us > 0 else 0.0
    return {"bytes": size_bytes, "count": count, "dtype": dtype, "time_us": round(time_us, 2),
            "algbw_gbps": round(algbw, 2), "busbw_gbps": round(algbw * bus_factor(world), 2),
            "wrong": wrong, "in_place": in_place, "graph": graph, "method": method}


class Timer:
    """Times `iters` back-to-back calls: CUDA events (optionally one graph replay) or the host clock."""

    def __init__(self, torch: Any, device: Any, use_graph: bool) -> None:
        self.torch, self.device, self.use_graph = torch, device, use_graph
        self.cuda = device.type == "cuda"

    def time_us(self, op: Any, iters: int, warmup: int) -> tuple[float, bool]:
        torch = self.torch
        for _ in range(warmup):
            op()
        if not self.cuda:
            start = time.perf_counter()
            for _ in range(iters):
                op()
            return (time.perf_counter() - start) * 1e6 / iters, False
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        if self.use_graph:
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                for _ in range(iters):
                    op()
            graph.replay()  # first replay uploads the graph; time the second
            torch.cuda.synchronize()
            start.record()
            graph.replay()
            end.record()
            end.synchronize()
            del graph
            return start.elapsed_time(end) * 1000.0 / iters, True
        start.record()
        for _ in range(iters):
            op()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) * 1000.0 / iters, False


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    import torch
    import torch.distributed as dist

    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    local = int(os.environ.get("LOCAL_RANK", 0))
    backend = os.environ.get("MGTUTOR_BACKEND") or ("nccl" if torch.cuda.is_available() else "gloo")
    events = EventWriter.from_env(rank)
    dtype_name = canonical_dtype(args.dtype)
    dtype = getattr(torch, TORCH_DTYPES[dtype_name])
    sizes = [int(s) for s in args.sizes.split(",") if s]
    events.emit("start", role="allreduce", backend=backend, world_size=world, dtype=dtype_name)
    if backend == "nccl":
        device = torch.device("cuda", local)
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", device_id=device)
        label = torch.cuda.get_device_name(device)
    else:
        device = torch.device("cpu")
        dist.init_process_group("gloo")
        label = "CPU"
    ops = Collectives(torch, dist, device, dtype, dtype_name, args.oop)
    max_count = max(element_count(s, dtype_name) for s in sizes)
    send, recv = ops.buffers(max_count)
    fill(torch, send, max_count, rank)
    fill(torch, recv, max_count, rank)
    graph_ok = ops.graph_usable() if args.graph != "off" and device.type == "cuda" else False
    if args.graph == "on" and not graph_ok:
        print("warning: CUDA graph capture failed; timing an eager loop instead", file=sys.stderr)
    timer = Timer(torch, device, graph_ok)
    if rank == 0:
        print(f"# mgtutor all-reduce: {world} ranks, {backend} on {label}, dtype {dtype_name}, "
              f"iters {args.iters}, warmup {args.warmup}, graph {graph_ok}, out-of-place via {ops.oop_method}",
              flush=True)
    for size in sizes:
        count = element_count(size, dtype_name)
        nbytes = count * DTYPE_SIZES[dtype_name]
        rows = []
        for in_place in (False, True):
            op = ops.inplace_op(recv, count) if in_place else ops.outofplace_op(send, recv, count)
            us, used_graph = timer.time_us(op, args.iters, args.warmup)
            us = ops.max_across_ranks(us)
            wrong = None
            if args.check:
                fill(torch, send, count, rank)
                if in_place:
                    fill(torch, recv, count, rank)
                ops.inplace_op(recv, count)() if in_place else ops.outofplace_op(send, recv, count)()
                wrong = int(ops.sum_across_ranks(count_wrong(torch, recv, count, world)))
            rows.append(make_row(nbytes, count, dtype_name, us, world, in_place, wrong, used_graph,
                                 "allreduce" if in_place else ops.oop_method))
        if rank == 0:
            events.emit("step", kind="allreduce", size=nbytes, rows=rows)
            print(" ".join(f"{k}={v}" for k, v in rows[0].items()), "|",
                  " ".join(f"{k}={rows[1][k]}" for k in ("time_us", "busbw_gbps", "wrong")), flush=True)
    if rank == 0:
        events.emit("result", kind="allreduce", backend=backend, world_size=world, device=label,
                    graph=graph_ok, oop_method=ops.oop_method)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    code = main(sys.argv[1:])
    # Free DDP's and gloo's last work objects while Python is fully alive: left to the exit, they can
    # abort the process after a successful run ("terminate called without an active exception").
    gc.collect()
    sys.exit(code)
