"""Where a `--cuda-graphs` step's time goes: compute kernels vs NCCL kernels, on 1 or 2 GPUs.

Replays mgtutor's whole-step graph (ResNet-50, 224×224, batch 128, bf16, channels_last), times 60
replays, then profiles 5 and prints one JSON line per rank: step time, the summed time of the compute
kernels and of the NCCL kernels per step, and the compute kernels that cost the most.

    python3 tests/bench/profile_graph_step.py
    BUCKET_MB=4 torchrun --nproc-per-node 2 tests/bench/profile_graph_step.py
"""
from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch.profiler import ProfilerActivity, profile

from mgtutor.training.worker.trainer.models import build_model
from mgtutor.training.worker.trainer.steps import GraphStepper, make_optimizer

TIMED, PROFILED, BATCH = 60, 5, 128


def kernel_times(stepper: GraphStepper, batch: list) -> tuple[list[dict], list[dict]]:
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(PROFILED):
            stepper.step(batch)
        torch.cuda.synchronize()
    with tempfile.NamedTemporaryFile(suffix=".json") as trace:
        prof.export_chrome_trace(trace.name)
        events = [e for e in json.loads(Path(trace.name).read_text())["traceEvents"] if e.get("cat") == "kernel"]
    nccl = [e for e in events if "nccl" in e["name"].lower()]
    return [e for e in events if e not in nccl], nccl


def per_step_ms(events: list[dict]) -> float:
    return round(sum(e["dur"] for e in events) / PROFILED / 1e3, 3)


def main() -> None:
    world, local = int(os.environ.get("WORLD_SIZE", "1")), int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device("cuda", local)
    torch.cuda.set_device(device)
    torch.backends.cudnn.benchmark = True
    if world > 1:
        dist.init_process_group("nccl", device_id=device)
    model = build_model("resnet50").to(device).to(memory_format=torch.channels_last)
    stepper = GraphStepper(model, make_optimizer(model, 0.05, device), device, torch.bfloat16, world > 1,
                           float(os.environ.get("BUCKET_MB", "0")) or None)
    images = torch.randn(BATCH, 3, 224, 224, device=device).contiguous(memory_format=torch.channels_last)
    batch = [(images, torch.randint(0, 10, (BATCH,), device=device))]
    for _ in range(8):  # eager warm-up, then the capture
        stepper.step(batch)
    torch.cuda.synchronize()
    began = time.perf_counter()
    for _ in range(TIMED):
        stepper.step(batch)
    torch.cuda.synchronize()
    step_s = (time.perf_counter() - began) / TIMED
    compute, nccl = kernel_times(stepper, batch)
    by_name: dict[str, float] = {}
    for event in compute:
        by_name[event["name"][:60]] = by_name.get(event["name"][:60], 0.0) + event["dur"]
    top = sorted(by_name.items(), key=lambda kv: -kv[1])[:6]
    print(json.dumps({"world_size": world, "rank": local, "step_ms": round(step_s * 1e3, 3),
                      "img_per_s": round(BATCH / step_s, 1), "kernels_per_step": (len(compute) + len(nccl)) / PROFILED,
                      "compute_kernels_ms": per_step_ms(compute), "nccl_kernels_ms": per_step_ms(nccl),
                      "top_compute_ms": [(name, round(us / PROFILED / 1e3, 3)) for name, us in top]}), flush=True)
    stepper.close()
    if world > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
