"""Lesson 3: nn.DataParallel vs one GPU: throughput and per-GPU memory. Run: python example.py"""
import argparse
import json
import sys
import time

import torch
from torch import nn


def report(**fields):
    print("REPORT " + json.dumps(fields), flush=True)


def make_model(features, hidden, classes):
    return nn.Sequential(nn.Linear(features, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                         nn.Linear(hidden, classes))


def throughput(model, batch, steps, warmup, features=256, classes=10):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(batch, features, device="cuda:0")
    y = torch.randint(0, classes, (batch,), device="cuda:0")
    for step in range(warmup + steps):
        if step == warmup:
            torch.cuda.synchronize()
            start = time.perf_counter()
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    torch.cuda.synchronize()
    return steps * batch / (time.perf_counter() - start)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, default=512, help="per GPU")
    parser.add_argument("--hidden", type=int, default=4096)
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args()
    gpus = torch.cuda.device_count()
    if gpus < 2:
        print("DataParallel needs at least two GPUs; this machine shows", gpus, file=sys.stderr)
        sys.exit(2)

    torch.manual_seed(0)
    single = make_model(256, args.hidden, 10).to("cuda:0")
    one = throughput(single, args.batch_size, args.steps, 20)
    print(f"1 GPU: {one:,.0f} samples/s (batch {args.batch_size})")

    # Same maths: one DataParallel step and one single-GPU step on the same batch give the same loss.
    torch.manual_seed(1)
    reference = make_model(256, args.hidden, 10).to("cuda:0")
    wrapped = nn.DataParallel(make_model(256, args.hidden, 10).to("cuda:0"))
    wrapped.module.load_state_dict(reference.state_dict())
    x = torch.randn(64 * gpus, 256, device="cuda:0")
    y = torch.randint(0, 10, (64 * gpus,), device="cuda:0")
    same = torch.allclose(nn.functional.cross_entropy(reference(x), y),
                          nn.functional.cross_entropy(wrapped(x), y), rtol=1e-3, atol=1e-4)
    del reference, wrapped

    for index in range(gpus):
        torch.cuda.reset_peak_memory_stats(index)
    model = nn.DataParallel(make_model(256, args.hidden, 10).to("cuda:0"))
    many = throughput(model, args.batch_size * gpus, args.steps, 20)
    memory = [round(torch.cuda.max_memory_allocated(i) / 2**30, 3) for i in range(gpus)]
    print(f"DataParallel on {gpus} GPUs: {many:,.0f} samples/s (batch {args.batch_size * gpus}), "
          f"speed-up {many / one:.2f}x")
    for index, gib in enumerate(memory):
        print(f"  cuda:{index} peak memory {gib:.2f} GiB")
    report(gpus=gpus, one_gpu_samples_per_s=round(one), dp_samples_per_s=round(many),
           dp_speedup=round(many / one, 2), memory_gib_per_gpu=memory, same_loss_as_one_gpu=bool(same),
           gpu0_holds_most=memory[0] >= max(memory[1:]))


if __name__ == "__main__":
    main()
