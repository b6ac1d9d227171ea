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

With --turns DIR --side NAME --other NAME (tests/bench/overhead_turns.py) two launches of this worker take turns
on one machine: after its warm-up each touches DIR/NAME.ready, then runs --windows windows of the work split
evenly, each when the other side hands it the turn through a FIFO, and hands it back; "windows" in the report
lists each window's rate. Adjacent windows then share the machine's state of the moment.
"""
from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path


class Turns:
    """This side's turn arrives as a byte in its FIFO; it hands the turn over with a byte in the other's.
    Both are opened read-write, so neither open nor write waits for the other side."""

    def __init__(self, folder: Path, side: str, other: str, windows: int):
        self.folder, self.side, self.windows = folder, side, windows
        self.mine = os.open(folder / f"{side}.turn", os.O_RDWR)
        self.theirs = os.open(folder / f"{other}.turn", os.O_RDWR)

    def ready(self) -> None:
        (self.folder / f"{self.side}.ready").touch()

    def take(self) -> None:
        os.read(self.mine, 1)

    def hand_over(self, window: int, rate: float) -> None:
        os.write(self.theirs, b"t")
        print(f"{self.side} window {window + 1}: {rate:,.1f}/s", flush=True)  # a line a window, on both sides


def windows_of(turns: Turns | None, work: int) -> list[int]:
    count = turns.windows if turns else 1
    return [work // count] * count


def cpu_work(iterations: int, turns: Turns | None = None) -> tuple[float, float, float, list[float]]:
    if turns:
        turns.ready()
    rates: list[float] = []
    seconds = cpu = 0.0
    acc = 0
    for window, count in enumerate(windows_of(turns, iterations)):
        if turns:
            turns.take()
        began, cpu_began = time.perf_counter(), time.process_time()
        for i in range(count):
            acc = (acc * 31 + i) & 0xFFFFFFFF
        took = time.perf_counter() - began
        seconds, cpu = seconds + took, cpu + time.process_time() - cpu_began
        rates.append(count / took)
        if turns:
            turns.hand_over(window, rates[-1])
    if acc == -1:  # keeps the loop's result alive
        print(acc)
    return sum(windows_of(turns, iterations)) / seconds, seconds, cpu, rates


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
             image: int | None = None, turns: Turns | None = None) -> tuple[float, float, float, list[float]]:
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
    if turns:
        turns.ready()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    rates: list[float] = []
    seconds = cpu = 0.0
    for window, count in enumerate(windows_of(turns, steps)):
        if turns:
            turns.take()
        cpu_began = time.process_time()
        start.record()
        for _ in range(count):
            step()
        end.record()
        end.synchronize()
        took = start.elapsed_time(end) / 1000
        seconds, cpu = seconds + took, cpu + time.process_time() - cpu_began
        rates.append(count * per_step / took)
        if turns:
            turns.hand_over(window, rates[-1])
    if world > 1:
        dist.barrier()
        dist.destroy_process_group()
    return sum(windows_of(turns, steps)) * per_step / seconds, seconds, cpu, rates


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=("cpu", "gpu"), default="cpu")
    parser.add_argument("--work", type=int, required=True, help="cpu: loop iterations; gpu: timed steps")
    parser.add_argument("--warmup", type=int, default=50, help="gpu: untimed steps first")
    parser.add_argument("--model", choices=("mlp", *RESNETS), default="mlp", help="gpu: the step's model")
    parser.add_argument("--batch", type=int, default=None, help="gpu resnets: images per step")
    parser.add_argument("--image", type=int, default=None, help="gpu resnets: image side in pixels")
    parser.add_argument("--report-dir", type=Path, required=True)
    parser.add_argument("--turns", type=Path, default=None, help="take turns with another launch (its FIFOs' folder)")
    parser.add_argument("--side", default="a")
    parser.add_argument("--other", default="b")
    parser.add_argument("--windows", type=int, default=100, help="with --turns: windows the work is split into")
    args = parser.parse_args()
    rank = int(os.environ.get("RANK", "0"))
    turns = Turns(args.turns, args.side, args.other, args.windows) if args.turns else None
    rate, seconds, cpu, rates = (cpu_work(args.work, turns) if args.mode == "cpu"
                                 else gpu_work(args.work, args.warmup, args.model, args.batch, args.image, turns))
    args.report_dir.mkdir(parents=True, exist_ok=True)
    (args.report_dir / f"rank{rank}.json").write_text(json.dumps(
        {"rank": rank, "rate": rate, "seconds": round(seconds, 4), "cpu_seconds": round(cpu, 4), "windows": rates}))


if __name__ == "__main__":
    main()
