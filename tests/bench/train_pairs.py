"""`mgtutor train` with its default flags against the plain training loop, on one GPU, in pairs.

    python tests/bench/train_pairs.py [--pairs 5] [--model resnet18] [--image-size 32] [--batch-size 512] [--steps 500]

Each pair runs `mgtutor train --strategy single` (one device, no DDP wrapper: the plain loop has
none either; every other flag left at its default, so `--cuda-graphs auto` decides) and
tests/bench/plain_train.py on the same model, batch and steps, in alternating order. Both report
their own samples/s over their timed steps (warm-up left out). Prints each pair, the median of the
per-pair ratios mgtutor ÷ plain with its spread, and one JSON line (--out FILE writes it too).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from overhead import NO_NVLS, print_result, spread

PLAIN = Path(__file__).with_name("plain_train.py")


def run(argv: list[str], timeout: float) -> str:
    proc = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **NO_NVLS, "PYTHONUNBUFFERED": "1"}, start_new_session=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc.stdout


def mgtutor_rate(args: argparse.Namespace) -> tuple[float, str]:
    out = run([sys.executable, "-m", "mgtutor.tui", "train", "--strategy", "single", "--model", args.model,
               "--image-size", str(args.image_size), "--batch-size", str(args.batch_size),
               "--steps", str(args.steps)], args.timeout)
    record = next(line.split("run record: ", 1)[1].strip() for line in reversed(out.splitlines())
                  if "run record: " in line)
    events = [json.loads(line) for line in Path(record, "events.jsonl").read_text().splitlines() if line.strip()]
    rate = sum(e["samples_per_s"] for e in events if e.get("type") == "result")
    graphs = next((e.get("cuda_graphs_why", "?") for e in events if e.get("type") == "start"), "?")
    return rate, graphs


def plain_rate(args: argparse.Namespace) -> float:
    out = run([sys.executable, str(PLAIN), "--model", args.model, "--image-size", str(args.image_size),
               "--batch-size", str(args.batch_size), "--steps", str(args.steps)], args.timeout)
    return float(json.loads(out.strip().splitlines()[-1])["samples_per_s"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--model", default="resnet18")
    parser.add_argument("--image-size", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=512)
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--timeout", type=float, default=240)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    pairs: list[tuple[float, float]] = []
    graphs = "?"
    try:
        for i in range(args.pairs):
            if i % 2 == 0:
                plain = plain_rate(args)
                mine, graphs = mgtutor_rate(args)
            else:
                mine, graphs = mgtutor_rate(args)
                plain = plain_rate(args)
            pairs.append((plain, mine))
            print(f"pair {i + 1} ({'plain' if i % 2 == 0 else 'mgtutor'} first): plain {plain:,.0f}  "
                  f"mgtutor {mine:,.0f} samples/s  ratio {mine / plain:.3f}", flush=True)
    except (RuntimeError, subprocess.TimeoutExpired, StopIteration, KeyError, ValueError) as exc:
        print(f"train_pairs: {exc}", file=sys.stderr)
        if not pairs:
            return 1
    ratios = [m / p for p, m in pairs]
    result = {"model": args.model, "image_size": args.image_size, "batch_size": args.batch_size,
              "steps": args.steps, "pairs": len(pairs), "mgtutor_cuda_graphs": graphs,
              "ratio": spread(ratios), "ratios": [round(r, 4) for r in ratios],
              "plain": spread([p for p, _ in pairs]), "mgtutor": spread([m for _, m in pairs])}
    r = result["ratio"]
    print(f"mgtutor train (default flags, --strategy single) ÷ plain loop: median {r['median']:.3f} "
          f"(range {r['min']:.3f}–{r['max']:.3f}) over {len(pairs)} pairs; mgtutor's cuda graphs: {graphs}")
    print_result(result, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
