"""Does being watched cost anything? The same rank under plain torchrun and under `mgtutor run`.

    python tests/bench/overhead.py [--pairs 9] [--nproc 1] [--work 30000000]        # CPU-bound rank, gloo
    python tests/bench/overhead.py --gpu [--pairs 9] [--nproc 2] [--work 3000]      # launch-bound GPU loop, NCCL
    python tests/bench/overhead.py --gpu --nproc 1 --model resnet50 --work 300      # a plain DDP ResNet loop

Each pair runs both launchers back to back, in alternating order (plain first in even pairs,
mgtutor first in odd ones) so a drift of the machine's load falls on both sides alike. The rate is
each rank's own, timed inside the rank over fixed work (tests/bench/overhead_worker.py), summed
over the ranks; the result is the median of the per-pair ratios mgtutor ÷ plain, with its range
and quartiles. Wall times (start-up included) are reported beside it, not used in the ratio.
Prints a table, then one JSON line; --out FILE also writes the JSON there.

When a cost shows, --variant looks for it: each round then runs plain torchrun and every variant
named (order rotated per round), and each variant gets its own median ratio against plain:
    mgtutor           `mgtutor run` as users start it (the default pair)
    mgtutor-omp1      the same with OMP_NUM_THREADS=1 (torchrun's own default; mgtutor sets cores ÷ nproc)
    mgtutor-quiet     the same with every live detector off (--hang-after 0 --rendezvous-warn 0 --silent-warn 0)
    mgtutor-bare      the same with the ranks' step instrumentation off (--no-instrument)
    plain-omp         plain torchrun with mgtutor's OMP_NUM_THREADS
    plain-hook        plain torchrun with mgtutor's stack hook on PYTHONPATH and its Flight Recorder settings
    plain-wrapper     plain torchrun starting each rank through mgtutor's rank wrapper
    plain-again       plain torchrun once more: the control, what two identical launches differ by
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WORKER = Path(__file__).with_name("overhead_worker.py")
NO_NVLS = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


VARIANTS = ("mgtutor", "mgtutor-omp1", "mgtutor-quiet", "mgtutor-bare", "plain-omp", "plain-hook", "plain-wrapper", "plain-again")
QUIET = ["--hang-after", "0", "--rendezvous-warn", "0", "--silent-warn", "0"]


def launch_argv(launcher: str, nproc: int, backend: str, worker_args: list[str]) -> list[str]:
    if launcher.startswith("plain"):
        wrapper = ["-m", "mgtutor.training.runs.launch.rank"] if launcher == "plain-wrapper" else []
        return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc),
                *wrapper, str(WORKER), *worker_args]
    quiet = QUIET if launcher == "mgtutor-quiet" else ["--no-instrument"] if launcher == "mgtutor-bare" else []
    return [sys.executable, "-m", "mgtutor.tui", "run", "--nproc", str(nproc), "--backend", backend, *quiet, "--",
            str(WORKER), *worker_args]


def launch_env(launcher: str, nproc: int, backend: str, scratch: Path) -> dict[str, str]:
    """What the variant adds to the environment (mgtutor's own settings, one at a time, under plain torchrun)."""
    if launcher == "mgtutor-omp1":
        return {"OMP_NUM_THREADS": "1"}
    if launcher == "plain-omp":
        return {"OMP_NUM_THREADS": str(max(1, (os.cpu_count() or 1) // nproc))}
    if launcher == "plain-hook":
        from mgtutor.training.runs.forensics.flight import flight_env
        from mgtutor.training.runs.records.record import RunRecord
        from mgtutor.training.runs.forensics.stacks import hook_env

        record = RunRecord.create("overhead-hook", scratch / "runs")
        return {**hook_env(record, dict(os.environ)), **flight_env(record, dict(os.environ), backend)}
    return {}


def one_run(launcher: str, args: argparse.Namespace, scratch: Path, index: int) -> dict[str, float]:
    report = scratch / f"{launcher}-{index}"
    worker_args = ["--mode", "gpu" if args.gpu else "cpu", "--work", str(args.work), "--report-dir", str(report)]
    if args.gpu:
        worker_args += ["--model", args.model, "--warmup", str(args.warmup_steps)]
    backend = "nccl" if args.gpu else "gloo"
    argv = launch_argv(launcher, args.nproc, backend, worker_args)
    env = {**os.environ, **NO_NVLS, "PYTHONUNBUFFERED": "1", **launch_env(launcher, args.nproc, backend, scratch)}
    if not args.gpu:
        env["CUDA_VISIBLE_DEVICES"] = ""  # CPU ranks: mgtutor must not pick NCCL on a GPU machine
    cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    proc = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env,
                          timeout=args.timeout, start_new_session=True)
    wall = time.perf_counter() - began
    cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    # CPU time of every process the launch made (launcher, torchrun, wrappers, ranks), start-up included
    cpu_total = (cpu_after.ru_utime - cpu_before.ru_utime) + (cpu_after.ru_stime - cpu_before.ru_stime)
    ranks = [json.loads(p.read_text()) for p in sorted(report.glob("rank*.json"))]
    if proc.returncode != 0 or len(ranks) != args.nproc:
        raise RuntimeError(f"{launcher} run {index} failed (exit {proc.returncode}, {len(ranks)} rank reports):\n"
                           f"{' '.join(argv)}\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    return {"rate": sum(r["rate"] for r in ranks), "wall_s": wall, "cpu_total_s": cpu_total,
            "cpu_share": sum(r["cpu_seconds"] / r["seconds"] for r in ranks) / len(ranks)}


def spread(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    quartiles = statistics.quantiles(ordered, n=4) if len(ordered) >= 2 else [ordered[0]] * 3
    return {"median": statistics.median(ordered), "min": ordered[0], "max": ordered[-1],
            "q1": quartiles[0], "q3": quartiles[2]}


def print_result(result: dict, out: Path | None) -> None:
    """The result as one JSON line on stdout, and in `out` too when given (the benches' --out FILE)."""
    line = json.dumps(result)
    print(line)
    if out:
        out.write_text(line + "\n")


def rounds(args: argparse.Namespace) -> list[dict[str, dict[str, float]]]:
    """Every launcher once per round, the order rotated each round (with two: alternating)."""
    launchers = ["plain", *args.variant]
    done: list[dict[str, dict[str, float]]] = []
    with tempfile.TemporaryDirectory(prefix="mgtutor-overhead-") as tmp:
        scratch = Path(tmp)
        began, last_round_s = time.monotonic(), 0.0
        for i in range(args.warmup_pairs + args.pairs):
            round_began = time.monotonic()
            if args.budget and done and (round_began - began) + last_round_s > args.budget:
                print(f"budget of {args.budget:.0f} s reached: {len(done)} rounds", flush=True)
                break
            shift = i % len(launchers)
            order = launchers[shift:] + launchers[:shift]
            runs = {launcher: one_run(launcher, args, scratch, i) for launcher in order}
            last_round_s = time.monotonic() - round_began
            if i < args.warmup_pairs:
                continue
            done.append(runs)
            plain = runs["plain"]
            cells = "  ".join(f"{v} {runs[v]['rate']:,.1f}/s ({runs[v]['rate'] / plain['rate']:.4f})" for v in args.variant)
            walls = " / ".join(f"{runs[v]['wall_s']:.1f}" for v in launchers)
            cpus = " / ".join(f"{runs[v]['cpu_total_s']:.1f}" for v in launchers)
            print(f"round {len(done):>2} ({order[0]} first): plain {plain['rate']:,.1f}/s  {cells}  "
                  f"wall {walls} s  all CPU {cpus} s", flush=True)
    return done


def measure(args: argparse.Namespace) -> dict[str, object]:
    pairs = rounds(args)
    ratios = [p["mgtutor"]["rate"] / p["plain"]["rate"] for p in pairs] if "mgtutor" in args.variant else []
    variants = {v: spread([p[v]["rate"] / p["plain"]["rate"] for p in pairs]) for v in args.variant}
    if not ratios:
        return {"mode": "gpu" if args.gpu else "cpu", "nproc": args.nproc, "work": args.work, "pairs": len(pairs),
                "variants": variants, "plain_rate": spread([p["plain"]["rate"] for p in pairs]),
                "load_after": os.getloadavg()[0], "cpus": os.cpu_count()}
    return {"variants": variants,
        "mode": "gpu" if args.gpu else "cpu", "nproc": args.nproc, "work": args.work, "pairs": len(pairs),
        "ratio": spread(ratios), "ratios": [round(r, 5) for r in ratios],
        "plain_rate": spread([p["plain"]["rate"] for p in pairs]),
        "mgtutor_rate": spread([p["mgtutor"]["rate"] for p in pairs]),
        "plain_wall_s": spread([p["plain"]["wall_s"] for p in pairs]),
        "mgtutor_wall_s": spread([p["mgtutor"]["wall_s"] for p in pairs]),
        "plain_cpu_total_s": spread([p["plain"]["cpu_total_s"] for p in pairs]),
        "mgtutor_cpu_total_s": spread([p["mgtutor"]["cpu_total_s"] for p in pairs]),
        "plain_rank_cpu_share": spread([p["plain"]["cpu_share"] for p in pairs]),
        "mgtutor_rank_cpu_share": spread([p["mgtutor"]["cpu_share"] for p in pairs]),
        "load_after": os.getloadavg()[0], "cpus": os.cpu_count(),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gpu", action="store_true", help="launch-bound GPU loop on NCCL (default: CPU-bound, gloo)")
    parser.add_argument("--pairs", type=int, default=9)
    parser.add_argument("--warmup-pairs", type=int, default=1, help="pairs run first and not counted (file caches)")
    parser.add_argument("--nproc", type=int, default=None, help="ranks per run (default: 1 on CPU, 2 on GPUs)")
    parser.add_argument("--work", type=int, default=None,
                        help="per rank: loop iterations (CPU, default 30M) or timed steps (GPU, default 3000)")
    parser.add_argument("--model", choices=("mlp", "resnet50", "resnet18"), default="mlp",
                        help="GPU: the rank's model (mlp: launch-bound; resnets: a plain DDP loop, bf16, synthetic batch)")
    parser.add_argument("--warmup-steps", type=int, default=50, help="GPU: untimed steps in each rank first")
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--budget", type=float, default=None,
                        help="seconds: start no round that would end past this (the rounds done are reported)")
    parser.add_argument("--variant", action="append", choices=VARIANTS, default=None,
                        help="what to compare with plain torchrun (repeatable; default: mgtutor)")
    args = parser.parse_args()
    args.variant = list(dict.fromkeys(args.variant or ["mgtutor"]))
    args.nproc = args.nproc or (2 if args.gpu else 1)
    args.work = args.work or (3000 if args.gpu else 30_000_000)
    load = os.getloadavg()[0]
    print(f"overhead: {'GPU ' + args.model + ' loop' if args.gpu else 'CPU-bound loop'}, {args.nproc} rank(s), "
          f"{args.pairs} pairs (+{args.warmup_pairs} warm-up), load average {load:.2f} on {os.cpu_count()} CPUs",
          flush=True)
    try:
        result = measure(args)
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        print(f"overhead: {exc}", file=sys.stderr)
        return 1
    result["load_before"] = load
    for name, r in result["variants"].items():
        print(f"{name} ÷ plain torchrun: median {r['median']:.4f} (range {r['min']:.4f}–{r['max']:.4f}, "
              f"quartiles {r['q1']:.4f}–{r['q3']:.4f}) over {result['pairs']} rounds")
    print(f"load average now {os.getloadavg()[0]:.2f}")
    print_result(result, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
