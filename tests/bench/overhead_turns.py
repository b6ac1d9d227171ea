"""Does `mgtutor run` cost a rank anything while it works? Two launches at once, taking turns.

    python tests/bench/overhead_turns.py --gpu --model resnet18 --work 6000 --windows 300 [--against mgtutor]
    python tests/bench/overhead_turns.py --against plain-again ...     # the control: two identical launches

overhead.py runs plain torchrun and `mgtutor run` one after the other; on a shared host a launch-bound loop's
speed wanders by tens of per cent from one minute to the next, so whole runs compared that way carry a few per
cent of noise even over a dozen rounds. Here both launches start together (plain torchrun first, then the
other once it is warm) and their ranks take turns on the machine (tests/bench/overhead_worker.py --turns):
a window of steps of one, then a window of the other, handed over through two FIFOs, each window timed inside
its rank (CUDA events on a GPU). Each window of the second launch is compared with the mean of the plain windows
just before and after it, so the host's spells fall on both sides alike and a slow drift cancels.

What it measures is what the launch changes in the rank's process (the ranks' hook and its step events, the
stack hook, the environment): both launchers' own processes are alive through every window, so their load on
the host falls on both sides; that load is overhead.py's "all CPU" column. One rank a side (--nproc 1).
Prints each side's windows as they end, then the median ratio and one JSON line; --out FILE writes the JSON.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from overhead import NO_NVLS, VARIANTS, launch_argv, launch_env, print_result, spread


def start(launcher: str, side: str, other: str, args: argparse.Namespace, scratch: Path) -> subprocess.Popen:
    worker_args = ["--mode", "gpu" if args.gpu else "cpu", "--work", str(args.work), "--report-dir",
                   str(scratch / side), "--turns", str(scratch), "--side", side, "--other", other,
                   "--windows", str(args.windows)]
    if args.gpu:
        worker_args += ["--model", args.model, "--warmup", str(args.warmup_steps)]
    backend = "nccl" if args.gpu else "gloo"
    env = {**os.environ, **NO_NVLS, "PYTHONUNBUFFERED": "1", **launch_env(launcher, 1, backend, scratch)}
    if not args.gpu:
        env["CUDA_VISIBLE_DEVICES"] = ""
    log = open(scratch / f"{side}.log", "w")
    return subprocess.Popen(launch_argv(launcher, 1, backend, worker_args), stdin=subprocess.DEVNULL, stdout=log,
                            stderr=subprocess.STDOUT, env=env, start_new_session=True)


def wait_ready(scratch: Path, side: str, proc: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not (scratch / f"{side}.ready").exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{side} never got ready (exit {proc.returncode}):\n"
                               + (scratch / f"{side}.log").read_text()[-3000:])
        time.sleep(0.05)


def windows(scratch: Path, side: str) -> list[float]:
    return json.loads((scratch / side / "rank0.json").read_text())["windows"]


def neighbour_ratios(first: list[float], second: list[float]) -> list[float]:
    """The order is first[0], second[0], first[1], second[1], …: second[i] against the mean of the first side's
    windows on either side of it (the last one has only the one before it)."""
    ratios = []
    for i, rate in enumerate(second):
        around = first[i:i + 2]
        ratios.append(rate / (sum(around) / len(around)))
    return ratios


def measure(args: argparse.Namespace) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="mgtutor-turns-") as tmp:
        scratch = Path(tmp)
        for side in ("plain", "other"):
            os.mkfifo(scratch / f"{side}.turn")
        procs: dict[str, subprocess.Popen] = {}
        try:
            procs["plain"] = start("plain", "plain", "other", args, scratch)
            wait_ready(scratch, "plain", procs["plain"], args.timeout)
            procs["other"] = start(args.against, "other", "plain", args, scratch)
            wait_ready(scratch, "other", procs["other"], args.timeout)
            began = time.monotonic()
            turn = os.open(scratch / "plain.turn", os.O_RDWR)
            os.write(turn, b"t")
            for side, proc in procs.items():
                proc.wait(timeout=args.timeout)
                if proc.returncode != 0:
                    raise RuntimeError(f"{side} exited {proc.returncode}:\n" + (scratch / f"{side}.log").read_text()[-3000:])
            seconds = time.monotonic() - began
            plain, other = windows(scratch, "plain"), windows(scratch, "other")
            said = [line for line in (scratch / "other.log").read_text().splitlines() if " window " not in line]
        finally:
            for proc in procs.values():
                if proc.poll() is None:
                    os.killpg(proc.pid, 9)
                    proc.wait()
    ratios = neighbour_ratios(plain, other)
    return {"mode": "gpu" if args.gpu else "cpu", "model": args.model if args.gpu else None, "against": args.against,
            "windows": len(ratios), "work_per_window": args.work // args.windows, "seconds": round(seconds, 1),
            "ratio": spread(ratios), "plain_rate": spread(plain), "other_rate": spread(other),
            "ratios": [round(r, 5) for r in ratios], "other_said": said[-20:]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gpu", action="store_true", help="a GPU loop (default: CPU-bound, pure Python)")
    parser.add_argument("--model", choices=("mlp", "resnet50", "resnet18"), default="resnet18")
    parser.add_argument("--work", type=int, default=6000, help="per side: steps (GPU) or loop iterations (CPU)")
    parser.add_argument("--windows", type=int, default=300, help="windows the work is split into, per side")
    parser.add_argument("--warmup-steps", type=int, default=50)
    parser.add_argument("--against", choices=[v for v in VARIANTS if v != "plain-wrapper"], default="mgtutor",
                        help="the launch that takes turns with plain torchrun (plain-again: the control)")
    parser.add_argument("--timeout", type=float, default=500)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    result = measure(args)
    r = result["ratio"]
    print(f"{args.against} ÷ plain torchrun, window by window: median {r['median']:.4f} (quartiles "
          f"{r['q1']:.4f}–{r['q3']:.4f}, range {r['min']:.4f}–{r['max']:.4f}) over {result['windows']} windows; "
          f"plain {result['plain_rate']['median']:,.1f}/s", flush=True)
    print_result(result, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
