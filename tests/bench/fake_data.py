"""Stand-ins for the data sets the corpus scripts read, in their real on-disk formats, with random content:
nothing is downloaded, and what the pixels or words are does not matter to whether a script trains.

    lay_out(("MNIST", "wikitext"), script_folder)

MNIST and FashionMNIST: torchvision's raw idx files (600 training, 256 test images: full batches of 100 per rank), under data/, ../data and
../../data of the script's folder (the roots the corpus scripts use). wikitext: data/wikitext-2/{train,valid,
test}.txt. shakespeare: nanoGPT's data/shakespeare/{train,val}.bin (uint16 token ids).
"""
from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

ROOTS = ("data", "../data", "../../data")


def write_idx(folder: Path, train: int = 600, test: int = 256, seed: int = 0) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    for prefix, n in (("train", train), ("t10k", test)):
        images = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
        labels = rng.integers(0, 10, n, dtype=np.uint8)
        (folder / f"{prefix}-images-idx3-ubyte").write_bytes(struct.pack(">IIII", 0x803, n, 28, 28) + images.tobytes())
        (folder / f"{prefix}-labels-idx1-ubyte").write_bytes(struct.pack(">II", 0x801, n) + labels.tobytes())


def write_wikitext(folder: Path, seed: int = 0) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(200)]
    for name, lines in (("train.txt", 400), ("valid.txt", 60), ("test.txt", 60)):
        text = "\n".join(" ".join(rng.choice(words, 12)) for _ in range(lines))
        (folder / name).write_text(text + "\n")


def write_token_bins(folder: Path, seed: int = 0) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    for name, n in (("train.bin", 20_000), ("val.bin", 4_000)):
        rng.integers(0, 50_000, n, dtype=np.uint16).tofile(folder / name)


def lay_out(kinds: tuple[str, ...], script_folder: Path) -> None:
    for kind in kinds:
        if kind in ("MNIST", "FashionMNIST"):
            for root in ROOTS:
                write_idx(script_folder / root / kind / "raw")
        elif kind == "wikitext":
            write_wikitext(script_folder / "data" / "wikitext-2")
        elif kind == "shakespeare":
            write_token_bins(script_folder / "data" / "shakespeare")
        else:
            raise ValueError(f"no stand-in for {kind!r}")
