"""Write a stand-in for CIFAR-10 on disk: the real python-pickle format, random uint8 images.

No data set can be downloaded on the benchmark machine, yet the seed article's recipe must run
through the real input pipeline (pickle → PIL → transforms → DataLoader workers). Throughput does
not depend on what the pixels show, so random images measure the same pipeline cost.

    python tests/bench/make_fake_cifar.py DIR [--per-batch 10000]   → DIR/cifar-10-batches-py/
"""
from __future__ import annotations

import argparse
import pickle
import sys
from pathlib import Path

import numpy as np


def write_fake_cifar(root: Path, per_batch: int = 10_000, batches: int = 5, seed: int = 0) -> Path:
    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    names = [f"data_batch_{i}" for i in range(1, batches + 1)] + ["test_batch"]
    for name in names:
        batch = {
            b"batch_label": name.encode(),
            b"labels": rng.integers(0, 10, per_batch).tolist(),
            b"data": rng.integers(0, 256, (per_batch, 3072), dtype=np.uint8),
            b"filenames": [f"{name}_{i}.png".encode() for i in range(per_batch)],
        }
        with (folder / name).open("wb") as handle:
            pickle.dump(batch, handle, protocol=2)
    meta = {b"label_names": [f"class{i}".encode() for i in range(10)], b"num_cases_per_batch": per_batch,
            b"num_vis": 3072}
    with (folder / "batches.meta").open("wb") as handle:
        pickle.dump(meta, handle, protocol=2)
    return folder


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path)
    parser.add_argument("--per-batch", type=int, default=10_000, help="images per batch file (CIFAR: 10000)")
    parser.add_argument("--batches", type=int, default=5)
    args = parser.parse_args(argv)
    folder = write_fake_cifar(args.root, args.per_batch, args.batches)
    print(f"wrote {args.batches} × {args.per_batch} random 32×32 images in CIFAR-10 format to {folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
