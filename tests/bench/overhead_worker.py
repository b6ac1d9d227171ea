"""The rank that tests/bench/overhead.py starts under plain torchrun and under `mgtutor run`.

Fixed work, timed inside the rank itself, so start-up and the launcher's own time are left out:
only what the launcher costs a rank *while it works* shows in the rate.

- cpu: a pure-Python integer loop (one core, no torch import), rate = loop iterations per second;
- gpu: a launch-bound step (a small MLP, forward + backward + fused SGD, DDP over NCCL when there
  are several ranks), rate = steps per second timed with CUDA events.

Each rank writes `{"rank", "rate", "seconds", "cpu_seconds"}` to REPORT_DIR/rank<R>.json.
"""
from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path


def cpu_work(iterations: int) -> tuple[float, float, float]:
    began, cpu_began = time.perf_counter(), time.process_time()
    acc = 0
    for i in range(iterations):
        acc = (acc * 31 + i) & 0xFFFFFFFF
    seconds = time.perf_counter() - began
    if acc == -1:  # keeps the loop's result alive
        print(acc)
    return iterations / seconds, seconds, time.process_time() - cpu_began


def gpu_work(steps: int, warmup: int) -> tuple[float, float, float]:
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F

    local = int(os.environ.get("LOCAL_RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    torch.cuda.set_device(local)
    layers: list[torch.nn.Module] = []
    for _ in range(8):
        layers += [torch.nn.Linear(256, 256), torch.nn.ReLU()]
    model: torch.nn.Module = torch.nn.Sequential(*layers, torch.nn.Linear(256, 10)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, fused=True)
    if world > 1:
        dist.init_process_group("nccl", device_id=torch.device("cuda", local))
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local], static_graph=True,
                                                          gradient_as_bucket_view=True)
    x = torch.randn(64, 256, device="cuda")
    y = torch.randint(0, 10, (64,), device="cuda")

    def step() -> None:
        F.cross_entropy(model(x), y).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    cpu_began = time.process_time()
    start.record()
    for _ in range(steps):
        step()
    end.record()
    end.synchronize()
    seconds = start.elapsed_time(end) / 1000
    cpu = time.process_time() - cpu_began
    if world > 1:
        dist.barrier()
        dist.destroy_process_group()
    return steps / seconds, seconds, cpu


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=("cpu", "gpu"), default="cpu")
    parser.add_argument("--work", type=int, required=True, help="cpu: loop iterations; gpu: timed steps")
    parser.add_argument("--warmup", type=int, default=50, help="gpu: untimed steps first")
    parser.add_argument("--report-dir", type=Path, required=True)
    args = parser.parse_args()
    rank = int(os.environ.get("RANK", "0"))
    rate, seconds, cpu = cpu_work(args.work) if args.mode == "cpu" else gpu_work(args.work, args.warmup)
    args.report_dir.mkdir(parents=True, exist_ok=True)
    (args.report_dir / f"rank{rank}.json").write_text(json.dumps(
        {"rank": rank, "rate": rate, "seconds": round(seconds, 4), "cpu_seconds": round(cpu, 4)}))


if __name__ == "__main__":
    main()
