"""Lesson 9: is the data pipeline fast enough? Measure samples/s with and without worker processes.

    python example.py --workers 4
"""
import argparse
import json
import time

import torch
from torch.utils.data import DataLoader, Dataset


def report(**fields):
    print("REPORT " + json.dumps(fields), flush=True)


class SlowToLoad(Dataset):
    """Each sample costs `delay` seconds to 'read and decode', as a JPEG from disk would."""

    def __init__(self, size, delay):
        self.size, self.delay = size, delay

    def __len__(self):
        return self.size

    def __getitem__(self, index):
        time.sleep(self.delay)
        generator = torch.Generator().manual_seed(index)
        return torch.randn(3, 32, 32, generator=generator), index % 10


def measure(dataset, batch_size, workers, pin, device):
    loader = DataLoader(dataset, batch_size=batch_size, num_workers=workers, pin_memory=pin,
                        persistent_workers=workers > 0)
    label_sum, start = 0, time.perf_counter()
    for images, labels in loader:
        images = images.to(device, non_blocking=pin)  # non_blocking only overlaps from pinned memory
        label_sum += int(labels.sum())
    if device.type == "cuda":
        torch.cuda.synchronize()
    return len(dataset) / (time.perf_counter() - start), label_sum


def main():
    cuda = torch.cuda.is_available()
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=2048 if cuda else 192)
    parser.add_argument("--batch-size", type=int, default=64 if cuda else 32)
    parser.add_argument("--delay", type=float, default=0.004, help="seconds to load one sample")
    parser.add_argument("--workers", type=int, default=4 if cuda else 2)
    args = parser.parse_args()
    device = torch.device("cuda:0" if cuda else "cpu")
    dataset = SlowToLoad(args.samples, args.delay)

    serial, sum0 = measure(dataset, args.batch_size, 0, False, device)
    print(f"num_workers=0: {serial:,.0f} samples/s — the training loop waits for every sample")
    parallel, sum_w = measure(dataset, args.batch_size, args.workers, cuda, device)
    print(f"num_workers={args.workers}, pin_memory={cuda}: {parallel:,.0f} samples/s "
          f"({parallel / serial:.1f}x)")
    report(samples_per_s_workers0=round(serial, 1), samples_per_s_workers=round(parallel, 1),
           workers=args.workers, loader_speedup=round(parallel / serial, 2), same_data=sum0 == sum_w)


if __name__ == "__main__":
    main()
