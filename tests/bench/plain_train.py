"""The reference: a plain training script with no mgtutor code, to compare `mgtutor train` against.

bf16 autocast, channels_last, synthetic data on the GPU, fused SGD; DDP (static_graph +
gradient_as_bucket_view) only when started with more than one rank; `--compile MODE` adds the one
line from the seed, `model = torch.compile(model)` (MODE reduce-overhead: with its CUDA graphs).
Prints one JSON line; `compile_s` is the warm-up steps' time (the compiling, with --compile) and
`ready_s` the time from the process's start to the first timed step.

    python tests/bench/plain_train.py --model resnet18 --image-size 32 --batch-size 512
    torchrun --nproc-per-node 2 tests/bench/plain_train.py --model resnet18 --image-size 32 --batch-size 512
"""
from __future__ import annotations

import argparse
import json
import os
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
import torchvision


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="resnet18", choices=("resnet18", "resnet50"))
    parser.add_argument("--image-size", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=512)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--compile", default="off", choices=("off", "default", "reduce-overhead"))
    args = parser.parse_args()
    world = int(os.environ.get("WORLD_SIZE", "1"))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    torch.backends.cudnn.benchmark = True
    model = getattr(torchvision.models, args.model)(num_classes=10).cuda().to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4, fused=True)
    if world > 1:
        dist.init_process_group("nccl", device_id=torch.device("cuda", local))
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local], static_graph=True,
                                                          gradient_as_bucket_view=True)
    if args.compile != "off":
        model = torch.compile(model, mode=None if args.compile == "default" else args.compile)
    x = torch.randn(args.batch_size, 3, args.image_size, args.image_size, device="cuda").contiguous(
        memory_format=torch.channels_last)
    y = torch.randint(0, 10, (args.batch_size,), device="cuda")

    def step() -> None:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    warm_began = time.perf_counter()
    for _ in range(args.warmup):
        step()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    compile_s, ready_s = time.perf_counter() - warm_began, time.time() - process_started()
    start.record()
    for _ in range(args.steps):
        step()
    end.record()
    torch.cuda.synchronize()
    per_rank = args.steps * args.batch_size / (start.elapsed_time(end) / 1000)
    if world > 1:
        total = torch.tensor([per_rank], device="cuda")
        dist.all_reduce(total)
        per_rank_total = total.item()
        dist.destroy_process_group()
    else:
        per_rank_total = per_rank
    if int(os.environ.get("RANK", "0")) == 0:
        print(json.dumps({"script": "plain", "model": args.model, "image_size": args.image_size,
                          "batch_size": args.batch_size, "world_size": world, "compile": args.compile,
                          "samples_per_s": round(per_rank_total, 1), "compile_s": round(compile_s, 2),
                          "ready_s": round(ready_s, 2)}))


def process_started() -> float:
    """When this process began (Linux: /proc/self/stat field 22, in clock ticks since boot)."""
    with open("/proc/self/stat") as handle:
        ticks = int(handle.read().rsplit(")", 1)[1].split()[19])
    return time.time() - (time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK"))


if __name__ == "__main__":
    main()
