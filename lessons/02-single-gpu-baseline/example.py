"""Lesson 2: train on one device and measure samples/s honestly. Run: python example.py"""
import argparse
import json
import time

import torch
from torch import nn


def report(**fields):
    print("REPORT " + json.dumps(fields), flush=True)


def make_model(features, hidden, classes):
    return nn.Sequential(nn.Linear(features, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                         nn.Linear(hidden, classes))


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def main():
    cuda = torch.cuda.is_available()
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, default=512 if cuda else 64)
    parser.add_argument("--hidden", type=int, default=4096 if cuda else 128)
    parser.add_argument("--steps", type=int, default=200 if cuda else 20)
    parser.add_argument("--warmup", type=int, default=20 if cuda else 3)
    args = parser.parse_args()

    device = torch.device("cuda:0" if cuda else "cpu")
    torch.manual_seed(0)
    features, classes = 256, 10
    model = make_model(features, args.hidden, classes).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    # A learnable synthetic task: labels come from a fixed random projection of the inputs.
    projection = torch.randn(features, classes, device=device)
    inputs = torch.randn(args.batch_size * 8, features, device=device)
    labels = (inputs @ projection).argmax(dim=1)

    losses = []
    for step in range(args.warmup + args.steps):
        if step == args.warmup:
            sync(device)
            start = time.perf_counter()
        chunk = step % 8
        x = inputs[chunk * args.batch_size:(chunk + 1) * args.batch_size]
        y = labels[chunk * args.batch_size:(chunk + 1) * args.batch_size]
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if step % 10 == 0 or step == args.warmup + args.steps - 1:
            losses.append(loss.item())
    sync(device)
    elapsed = time.perf_counter() - start
    rate = args.steps * args.batch_size / elapsed
    print(f"{device}: {args.steps} steps of {args.batch_size} in {elapsed:.2f} s -> {rate:,.0f} samples/s")
    print(f"loss {losses[0]:.3f} -> {losses[-1]:.3f}")
    report(device=str(device), samples_per_s=round(rate, 1), first_loss=round(losses[0], 4),
           last_loss=round(losses[-1], 4), loss_went_down=losses[-1] < losses[0],
           batch_size=args.batch_size, hidden=args.hidden)


if __name__ == "__main__":
    main()
