"""Lesson 11, step 3: which training step wins at 32×32 and at 224×224 on this GPU.

    torchrun --nproc-per-node 1 compare.py          (--smoke: a few CPU steps, no graphs, to read the code run)

Four ways to run the same ResNet-18 step (bf16 autocast, channels_last, fused SGD, one synthetic batch):
eager; `torch.compile(model)`; the whole eager step recorded as one CUDA graph and replayed; and the
compiled model inside that graph. Compiling is timed apart from the throughput.
"""
import argparse
import json
import time

import torch
import torch.nn.functional as F
import torchvision

VARIANTS = ("eager", "compiled", "graphed", "compiled_graphed")


def report(**fields):
    print("REPORT " + json.dumps(fields), flush=True)


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def setup(device, batch, size, compiled, backend):
    torch.manual_seed(0)
    model = torchvision.models.resnet18(num_classes=10).to(device).to(memory_format=torch.channels_last)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, fused=device.type == "cuda")
    forward = model
    if compiled:
        # One process measures two sizes of the same model: compiled again at the second size, Dynamo
        # would make that graph's shapes symbolic (generic kernels, slower) unless it starts afresh and
        # is told to keep them static.
        torch.compiler.reset()
        forward = torch.compile(model, backend=backend, dynamic=False)
    x = torch.randn(batch, 3, size, size, device=device).contiguous(memory_format=torch.channels_last)
    y = torch.randint(0, 10, (batch,), device=device)

    def step():
        with torch.autocast(device.type, dtype=torch.bfloat16):
            loss = F.cross_entropy(forward(x), y)
        loss.backward()
        optimizer.step()
        return loss.detach()

    return step, optimizer


def as_graph(step, optimizer, warm):
    """Warm up on a side stream (cuDNN and inductor choose their kernels there), then record one whole
    step; a replay relaunches all of its kernels at once and writes the same output tensors."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warm):
            optimizer.zero_grad(set_to_none=True)
            step()
    torch.cuda.current_stream().wait_stream(side)
    optimizer.zero_grad(set_to_none=True)  # the gradients now live in the graph's memory
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        loss = step()
    return lambda: (graph.replay(), loss)[1]


def measure(variant, device, batch, size, steps, backend, warm=3):
    """(images/s, seconds until the step was ready, last loss) for one way of running the step."""
    began = time.perf_counter()
    step, optimizer = setup(device, batch, size, variant.startswith("compiled"), backend)
    if variant.endswith("graphed"):
        run = as_graph(step, optimizer, warm)
    else:
        def run():
            optimizer.zero_grad(set_to_none=True)
            return step()
        for _ in range(warm):  # the first call compiles
            run()
    sync(device)
    ready = time.perf_counter() - began
    start = time.perf_counter()
    for _ in range(steps):
        loss = run()
    sync(device)
    return steps * batch / (time.perf_counter() - start), ready, float(loss)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--smoke", action="store_true", help="a few steps on the CPU, without the graphed variants")
    args = parser.parse_args()
    device = torch.device("cpu") if args.smoke else torch.device("cuda", 0)
    torch.backends.cudnn.benchmark = True
    backend = "aot_eager" if args.smoke else "inductor"
    variants = VARIANTS[:2] if args.smoke else VARIANTS
    cases = {32: (4, 2), 64: (2, 2)} if args.smoke else {32: (256, 300), 224: (64, 100)}
    fields, finite = {}, True
    for size, (batch, steps) in cases.items():
        rates = {}
        for variant in variants:
            rate, ready, loss = measure(variant, device, batch, size, steps, backend)
            rates[variant] = rate
            finite = finite and loss == loss and abs(loss) != float("inf")
            fields[f"{variant}_{size}_samples_per_s"] = round(rate)
            fields[f"{variant}_{size}_ready_s"] = round(ready, 2)
            print(f"{size}×{size}, batch {batch}: {variant:<17} {rate:>10,.0f} images/s  "
                  f"(ready after {ready:.1f} s)", flush=True)
        winner = max(rates, key=rates.get)
        fields[f"winner_{size}"] = winner
        fields[f"winner_{size}_over_eager"] = round(rates[winner] / rates["eager"], 2)
        print(f"{size}×{size}: {winner} wins, {rates[winner] / rates['eager']:.2f}× eager", flush=True)
    report(losses_finite=finite, **fields)


if __name__ == "__main__":
    main()
