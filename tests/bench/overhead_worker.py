"""The rank that tests/bench/overhead.py starts under plain torchrun and under `mgtutor run`.

Fixed work, timed inside the rank itself, so start-up and the launcher's own time are left out:
only what the launcher costs a rank *while it works* shows in the rate.

- cpu: a pure-Python integer loop (one core, no torch import), rate = loop iterations per second;
- gpu: a launch-bound step (a small MLP, forward + backward + fused SGD, DDP over NCCL when there
  are several ranks), rate = steps per second timed with CUDA events;
- gpu with --model resnet50 / resnet18: torchvision's ResNet on a synthetic batch (224² batch 128 /
  32² batch 512 unless --batch and --image say otherwise), bf16 autocast, channels-last, DDP, SGD;
  rate = images per second, timed with CUDA events after the warm-up.

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


RESNETS = {"resnet50": (224, 128), "resnet18": (32, 512)}  # image side, batch: the two loops


def mlp_step(local: int, world: int):
    import torch
    import torch.nn.functional as F

    layers: list[torch.nn.Module] = []
    for _ in range(8):
        layers += [torch.nn.Linear(256, 256), torch.nn.ReLU()]
    model: torch.nn.Module = torch.nn.Sequential(*layers, torch.nn.Linear(256, 10)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, fused=True)
    if world > 1:
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local], static_graph=True,
                                                          gradient_as_bucket_view=True)
    x = torch.randn(64, 256, device="cuda")
    y = torch.randint(0, 10, (64,), device="cuda")

    def step() -> None:
        F.cross_entropy(model(x), y).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return step, 1


def resnet_step(name: str, local: int, world: int, batch: int | None, image: int | None):
    """A plain DDP loop as a user writes it: the loss's backward, the optimizer's step."""
    import torch
    import torch.nn.functional as F
    import torchvision

    side, size = image or RESNETS[name][0], batch or RESNETS[name][1]
    torch.backends.cudnn.benchmark = True
    model: torch.nn.Module = getattr(torchvision.models, name)(num_classes=1000).cuda().to(memory_format=torch.channels_last)
    model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local]) if world > 1 else model
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(size, 3, side, side, device="cuda").to(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (size,), device="cuda")

    def step() -> None:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return step, size


def gpu_work(steps: int, warmup: int, model_name: str = "mlp", batch: int | None = None,
             image: int | None = None) -> tuple[float, float, float]:
    import torch
    import torch.distributed as dist

    local = int(os.environ.get("LOCAL_RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    torch.cuda.set_device(local)
    if world > 1:
        dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    step, per_step = (mlp_step(local, world) if model_name == "mlp"
                      else resnet_step(model_name, local, world, batch, image))

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
    return steps * per_step / seconds, seconds, cpu


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=("cpu", "gpu"), default="cpu")
    parser.add_argument("--work", type=int, required=True, help="cpu: loop iterations; gpu: timed steps")
    parser.add_argument("--warmup", type=int, default=50, help="gpu: untimed steps first")
    parser.add_argument("--model", choices=("mlp", *RESNETS), default="mlp", help="gpu: the step's model")
    parser.add_argument("--batch", type=int, default=None, help="gpu resnets: images per step")
    parser.add_argument("--image", type=int, default=None, help="gpu resnets: image side in pixels")
    parser.add_argument("--report-dir", type=Path, required=True)
    args = parser.parse_args()
    rank = int(os.environ.get("RANK", "0"))
    rate, seconds, cpu = (cpu_work(args.work) if args.mode == "cpu"
                          else gpu_work(args.work, args.warmup, args.model, args.batch, args.image))
    args.report_dir.mkdir(parents=True, exist_ok=True)
    (args.report_dir / f"rank{rank}.json").write_text(json.dumps(
        {"rank": rank, "rate": rate, "seconds": round(seconds, 4), "cpu_seconds": round(cpu, 4)}))


if __name__ == "__main__":
    main()
