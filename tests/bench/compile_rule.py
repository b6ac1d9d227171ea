"""Does compiling pay inside the whole-step graph? `mgtutor train` with `--compile off` against
`--compile default` at the shapes where `--compile auto`'s rule has no measurement of its own, on one GPU.

    python tests/bench/compile_rule.py [--pairs 3] [--steps 500] [--shapes resnet18:32:256,resnet18:224:64]

A pair is two processes in an order that turns pair by pair; both run with `--cuda-graphs on`, so
`--compile default` runs the compiled model inside the graph (as auto would choose it) and `off` the graphed
eager step. Inductor's caches start empty in a fresh folder: the first compiled run is cold, the later ones
warm. Prints every run, then per shape the median images/s of each and the ratio per pair (compiled ÷ off),
and one JSON line (--out FILE writes it too).
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from compile_pairs import mgtutor_run, print_and_save, spread

DEFAULT_SHAPES = "resnet18:32:256,resnet18:32:512,resnet18:224:64,resnet18:224:256,resnet50:224:128"
VARIANTS = ("off", "default")
GRAPHED = ("--cuda-graphs", "on")  # both variants in the whole-step graph, as auto runs them


def parse_shapes(text: str) -> list[tuple[str, int, int]]:
    shapes = []
    for item in text.split(","):
        model, size, batch = item.split(":")
        shapes.append((model, int(size), int(batch)))
    return shapes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--shapes", default=DEFAULT_SHAPES, help="MODEL:IMAGE_SIZE:BATCH,… (default: %(default)s)")
    parser.add_argument("--budget-s", type=float, default=540, help="start no new pair after this many seconds")
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    try:
        shapes = parse_shapes(args.shapes)
    except ValueError:
        parser.error(f"--shapes wants MODEL:IMAGE_SIZE:BATCH items separated by commas, not {args.shapes!r}")
    began = time.perf_counter()
    home = Path(tempfile.mkdtemp(prefix="compile-rule-"))
    env = {"XDG_CACHE_HOME": str(home / "cache"), "XDG_STATE_HOME": str(home / "state")}
    summaries = []
    for shape in shapes:
        name = ":".join(map(str, shape))
        rates: dict[str, list[float]] = {v: [] for v in VARIANTS}
        ratios = []
        for i in range(args.pairs):
            if time.perf_counter() - began > args.budget_s:
                print(f"{name}: budget spent after {i} pairs", flush=True)
                break
            pair = {}
            for variant in VARIANTS if i % 2 == 0 else reversed(VARIANTS):
                try:
                    row = mgtutor_run(shape, args.steps, env, args.timeout, ("--compile", variant, *GRAPHED))
                except (RuntimeError, subprocess.TimeoutExpired, StopIteration, KeyError, ValueError) as exc:
                    print(f"{name} pair {i + 1} --compile {variant}: {exc}", file=sys.stderr, flush=True)
                    continue
                pair[variant] = row["samples_per_s"]
                rates[variant].append(row["samples_per_s"])
                print(f"{name} pair {i + 1}: --compile {variant:<8} {row['samples_per_s']:>11,.0f} img/s  "
                      f"compile {row['compile_s']} s  ready {row['ready_s']} s  [{row['compile']}]", flush=True)
            if len(pair) == len(VARIANTS):
                ratios.append(pair["default"] / pair["off"])
        summary = {"shape": name, "samples_per_s": {v: spread(r) for v, r in rates.items()},
                   "compiled_over_off": spread(ratios), "ratios": [round(r, 4) for r in ratios]}
        summaries.append(summary)
        print(f"{name}: compiled inside the graph ÷ graphed eager per pair: {summary['ratios']}", flush=True)
    print_and_save({"steps": args.steps, "seconds": round(time.perf_counter() - began, 1), "shapes": summaries},
                   args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
