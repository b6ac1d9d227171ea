"""Lesson 10: mixed precision with torch.amp: bf16 autocast, fp16 with a GradScaler, and the speed-up.

    torchrun --nproc-per-node 2 example.py            add --measure on GPUs to time fp32, bf16, fp16
"""
import argparse
import gc
import json
import math
import os
import time
from datetime import timedelta

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


def report(**fields):
    print("REPORT " + json.dumps(fields), flush=True)


def setup():
    backend = os.environ.get("MGTUTOR_BACKEND") or ("nccl" if torch.cuda.is_available() else "gloo")
    local_rank = int(os.environ["LOCAL_RANK"])
    if backend == "nccl":
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")
    dist.init_process_group(backend=backend, timeout=timedelta(seconds=60))
    return dist.get_rank(), dist.get_world_size(), local_rank, device


def make_model(hidden, device, local_rank):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(512, hidden), nn.GELU(), nn.Linear(hidden, hidden), nn.GELU(),
                          nn.Linear(hidden, 10)).to(device)
    return DDP(model, device_ids=[local_rank] if device.type == "cuda" else None)


def train(model, device, dtype, steps, batch, warmup=0):
    """Train `steps` steps under autocast(dtype) (None: plain fp32); returns (losses, samples/s, scaler)."""
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    # fp16 has a narrow range: small gradients underflow to 0 unless the loss is scaled up first.
    scaler = torch.amp.GradScaler(device.type, enabled=dtype == torch.float16)
    x = torch.randn(batch, 512, device=device)
    y = torch.randint(0, 10, (batch,), device=device)
    losses = []
    for step in range(warmup + steps):
        if step == warmup:
            if device.type == "cuda":
                torch.cuda.synchronize()
            start = time.perf_counter()
        with torch.autocast(device.type, dtype=dtype or torch.float32, enabled=dtype is not None):
            logits = model(x)
            loss = nn.functional.cross_entropy(logits, y)
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        losses.append(loss.detach())  # no .item() here: it would make the CPU wait for the GPU every step
    if device.type == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    return torch.stack(losses).float().tolist(), steps * batch / seconds, scaler, logits.dtype


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--measure", action="store_true", help="time fp32, bf16 and fp16 (GPUs)")
    parser.add_argument("--hidden", type=int, default=None)
    parser.add_argument("--steps", type=int, default=None)
    args = parser.parse_args()
    rank, world, local_rank, device = setup()
    try:
        cuda = device.type == "cuda"
        hidden = args.hidden or (8192 if args.measure else 64)
        steps = args.steps or (100 if args.measure else 6)
        batch = 1024 if args.measure else 32

        model = make_model(hidden, device, local_rank)
        losses, bf16_rate, _, out_dtype = train(model, device, torch.bfloat16, steps, batch, warmup=3)
        weights_dtype = next(model.parameters()).dtype
        print(f"rank {rank}: bf16 autocast: outputs {out_dtype}, weights stay {weights_dtype}, "
              f"loss {losses[0]:.3f} -> {losses[-1]:.3f}")
        fields = dict(output_dtype=str(out_dtype), output_is_bf16=out_dtype == torch.bfloat16,
                      master_weights_fp32=weights_dtype == torch.float32,
                      loss_finite=all(math.isfinite(v) for v in losses), bf16_samples_per_s=round(bf16_rate * world))
        if args.measure:
            fp32_rate = train(make_model(hidden, device, local_rank), device, None, steps, batch, warmup=5)[1]
            bf16_rate = train(make_model(hidden, device, local_rank), device, torch.bfloat16, steps, batch, warmup=5)[1]
            fp16_losses, fp16_rate, scaler, _ = train(make_model(hidden, device, local_rank), device,
                                                      torch.float16, steps, batch, warmup=5)
            fields.update(fp32_samples_per_s=round(fp32_rate * world), bf16_samples_per_s=round(bf16_rate * world),
                          fp16_samples_per_s=round(fp16_rate * world), bf16_speedup=round(bf16_rate / fp32_rate, 2),
                          fp16_speedup=round(fp16_rate / fp32_rate, 2), grad_scale=scaler.get_scale(),
                          fp16_finite=all(math.isfinite(v) for v in fp16_losses))
            if rank == 0:
                print(f"fp32 {fields['fp32_samples_per_s']:,} | bf16 {fields['bf16_samples_per_s']:,} "
                      f"({fields['bf16_speedup']}x) | fp16 {fields['fp16_samples_per_s']:,} "
                      f"({fields['fp16_speedup']}x) samples/s on {world} rank(s); grad scale {scaler.get_scale():g}")
        report(rank=rank, **fields)
        # all ranks finish before any tears down: an early exit can abort a peer's last collective
        dist.barrier(device_ids=[local_rank] if device.type == "cuda" else None)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
    # Free DDP's and gloo's last work objects while Python is fully alive: left to the exit, they can
    # abort the process after a successful run ("terminate called without an active exception").
    gc.collect()
