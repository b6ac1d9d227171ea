"""`mgtutor train` with default flags against every plain loop a reader of the seeds would write, on one GPU.

    python tests/bench/compile_pairs.py [--pairs 3] [--steps 500] [--cases r50-224,r18-32] [--budget-s 520]

For each case (ResNet-50 224² batch 128, ResNet-18 32² batch 512) a pair is four runs, each its own
process: `mgtutor train --strategy single` with nothing else set (so `--compile auto` and
`--cuda-graphs auto` decide), and tests/bench/plain_train.py as eager, `torch.compile(model)` and
`torch.compile(model, mode="reduce-overhead")`. The order turns from pair to pair (mgtutor first,
then last; the plain variants rotated). Throughput is each run's own samples/s over its timed steps;
compiling is reported apart: `compile_s` (the compiling steps) and `ready_s` (from the process's start
to its first timed step). Inductor's caches start empty in a fresh folder: mgtutor's first run is
the cold one, its later runs are warm; the plain runs share that folder (TORCHINDUCTOR_CACHE_DIR).
Prints every run, a table per case and one JSON line (--out FILE writes it too).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from overhead import NO_NVLS

PLAIN = Path(__file__).with_name("plain_train.py")
CASES = {"r50-224": ("resnet50", 224, 128), "r18-32": ("resnet18", 32, 512)}
PLAIN_VARIANTS = ("off", "default", "reduce-overhead")


def run(argv: list[str], env: dict[str, str], timeout: float) -> str:
    proc = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **NO_NVLS, "PYTHONUNBUFFERED": "1", **env}, start_new_session=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc.stdout


def mgtutor_run(case: tuple[str, int, int], steps: int, env: dict[str, str], timeout: float,
                extra: tuple[str, ...] = ()) -> dict[str, Any]:
    model, size, batch = case
    began = time.perf_counter()
    out = run([sys.executable, "-m", "mgtutor.tui", "train", "--strategy", "single", "--model", model,
               "--image-size", str(size), "--batch-size", str(batch), "--steps", str(steps), *extra], env, timeout)
    wall = time.perf_counter() - began
    record = next(line.split("run record: ", 1)[1].strip() for line in reversed(out.splitlines())
                  if "run record: " in line)
    events = [json.loads(line) for line in Path(record, "events.jsonl").read_text().splitlines() if line.strip()]
    result = next(e for e in events if e.get("type") == "result")
    start = next(e for e in events if e.get("type") == "start")
    compile_lines = [line for line in out.splitlines() if "compile: " in line]
    return {"variant": "mgtutor", "samples_per_s": result["samples_per_s"], "compile": result.get("compile"),
            "compile_s": result.get("compile_s"), "ready_s": result.get("ready_s"), "wall_s": round(wall, 2),
            "compile_cache": result.get("compile_cache"), "compile_fallback": result.get("compile_fallback"),
            "cuda_graphs": start.get("cuda_graphs_why"), "lines": compile_lines}


def plain_run(case: tuple[str, int, int], steps: int, mode: str, env: dict[str, str], timeout: float) -> dict[str, Any]:
    model, size, batch = case
    began = time.perf_counter()
    out = run([sys.executable, str(PLAIN), "--model", model, "--image-size", str(size), "--batch-size", str(batch),
               "--steps", str(steps), "--compile", mode], env, timeout)
    row = json.loads(out.strip().splitlines()[-1])
    return {"variant": f"plain-{mode}", "samples_per_s": row["samples_per_s"], "compile_s": row["compile_s"],
            "ready_s": row["ready_s"], "wall_s": round(time.perf_counter() - began, 2)}


def print_and_save(result: dict[str, Any], out: Path | None) -> None:
    """The result as one JSON line on stdout, and in OUT when given."""
    line = json.dumps(result)
    print(line)
    if out:
        out.write_text(line + "\n")


def spread(values: list[float]) -> dict[str, float]:
    return {"median": round(statistics.median(values), 3), "min": round(min(values), 3),
            "max": round(max(values), 3)} if values else {}


def summarize(name: str, pairs: list[dict[str, dict[str, Any]]]) -> dict[str, Any]:
    variants = ("mgtutor", *(f"plain-{m}" for m in PLAIN_VARIANTS))
    rates = {v: [p[v]["samples_per_s"] for p in pairs if v in p] for v in variants}
    full = [p for p in pairs if all(v in p for v in variants)]
    best = [max(p[f"plain-{m}"]["samples_per_s"] for m in PLAIN_VARIANTS) for p in full]
    ratio = [p["mgtutor"]["samples_per_s"] / b for p, b in zip(full, best)]
    mg = [p["mgtutor"] for p in pairs if "mgtutor" in p]
    return {"case": name, "pairs": len(full), "samples_per_s": {v: spread(r) for v, r in rates.items()},
            "ratio_vs_best_plain": spread(ratio), "ratios": [round(r, 4) for r in ratio],
            "compile_s": {v: [p[v]["compile_s"] for p in pairs if v in p] for v in variants},
            "ready_s": {v: [p[v]["ready_s"] for p in pairs if v in p] for v in variants},
            "mgtutor_compile": mg[0]["compile"] if mg else None,
            "mgtutor_cuda_graphs": mg[0]["cuda_graphs"] if mg else None,
            "mgtutor_fallback": [m["compile_fallback"] for m in mg if m.get("compile_fallback")],
            "mgtutor_cache": [m["compile_cache"] for m in mg]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--cases", default="r50-224,r18-32")
    parser.add_argument("--budget-s", type=float, default=520, help="start no new pair after this many seconds")
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    began = time.perf_counter()
    home = Path(tempfile.mkdtemp(prefix="compile-pairs-"))
    mg_env = {"XDG_CACHE_HOME": str(home / "cache"), "XDG_STATE_HOME": str(home / "state")}
    os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)  # mgtutor's own folder, as a user gets it
    plain_env = {"TORCHINDUCTOR_CACHE_DIR": str(home / "cache" / "mgtutor" / "inductor")}
    summaries = []
    for name in args.cases.split(","):
        case = CASES[name]
        pairs: list[dict[str, dict[str, Any]]] = []
        for i in range(args.pairs):
            if time.perf_counter() - began > args.budget_s:
                print(f"{name}: budget spent after {i} pairs", flush=True)
                break
            plain_order = [PLAIN_VARIANTS[(i + k) % 3] for k in range(3)]
            order: list[str] = ["mgtutor", *plain_order] if i % 2 == 0 else [*plain_order, "mgtutor"]
            pair: dict[str, dict[str, Any]] = {}
            try:
                for what in order:
                    row = (mgtutor_run(case, args.steps, mg_env, args.timeout) if what == "mgtutor"
                           else plain_run(case, args.steps, what, plain_env, args.timeout))
                    pair[row["variant"]] = row
                    print(f"{name} pair {i + 1}: {row['variant']:<22} {row['samples_per_s']:>11,.0f} img/s  "
                          f"compile {row['compile_s']} s  ready {row['ready_s']} s  wall {row['wall_s']} s"
                          + (f"  [{row['compile']}; {row['compile_cache']}; fallback {row['compile_fallback']}]"
                             if what == "mgtutor" else ""), flush=True)
                    if what == "mgtutor" and i == 0:
                        print("\n".join(f"    {line}" for line in row["lines"]), flush=True)
            except (RuntimeError, subprocess.TimeoutExpired, StopIteration, KeyError, ValueError) as exc:
                print(f"{name} pair {i + 1}: {exc}", file=sys.stderr, flush=True)
            pairs.append(pair)
            if args.out:  # after every pair: a call cut short still brings back what it measured
                args.out.with_suffix(".partial.json").write_text(json.dumps(
                    {"done": summaries, "case": name, "pairs": pairs}) + "\n")
        summary = summarize(name, pairs)
        summaries.append(summary)
        r = summary["ratio_vs_best_plain"]
        print(f"{name}: median samples/s " + ", ".join(f"{v} {s.get('median', 0):,.0f}"
                                                        for v, s in summary["samples_per_s"].items())
              + (f"; mgtutor ÷ best plain per pair: median {r['median']:.3f} ({r['min']:.3f}–{r['max']:.3f})"
                 if r else ""), flush=True)
    print_and_save({"steps": args.steps, "seconds": round(time.perf_counter() - began, 1), "cases": summaries},
                   args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
