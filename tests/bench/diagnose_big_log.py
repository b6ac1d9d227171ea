"""Time `mgtutor diagnose` on a big log: write one (realistic noise, one real failure near the end), then
run the CLI on it several times, each in a fresh process, and report wall time and peak RSS.

    python tests/bench/diagnose_big_log.py [--mb 200] [--runs 3] [--keep PATH]

The noise is what a long DDP job prints: four ranks interleaved with `[rankN]:` prefixes, step lines,
tqdm bars redrawn with `\\r`, NCCL INFO lines (NCCL writes to stdout), Python warnings, torchrun's own
log lines and now and then a 64 KB line (a dumped tensor). Near the end rank 1 runs out of GPU memory,
the other ranks' watchdogs time out and torchrun prints its ChildFailedError block.
"""
from __future__ import annotations

import argparse
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RANKS = 4
FAILURE = """\
[rank1]: Traceback (most recent call last):
[rank1]:   File "/home/user/train.py", line 88, in <module>
[rank1]:     loss = model(batch).sum()
[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 1 has a total capacity of 79.10 GiB of which 1.06 GiB is free. Including non-PyTorch memory, this process has 78.03 GiB memory in use. Of the allocated memory 75.20 GiB is allocated by PyTorch, and 1.31 GiB is reserved by PyTorch but unallocated.
[rank0]:[E1201 10:01:02.123456789 ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=98001, OpType=ALLREDUCE, NumelIn=6572160, NumelOut=6572160, Timeout(ms)=600000) ran for 600011 milliseconds before timing out.
[rank2]:[E1201 10:01:02.123456999 ProcessGroupNCCL.cpp:616] [Rank 2] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=98001, OpType=ALLREDUCE, NumelIn=6572160, NumelOut=6572160, Timeout(ms)=600000) ran for 600012 milliseconds before timing out.
E1201 10:01:05.620000 2606 site-packages/torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: 1) local_rank: 1 (pid: 2631) of binary: /usr/bin/python3
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
train.py FAILED
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-12-01_10:01:05
  host      : node0
  rank      : 1 (local_rank: 1)
  exitcode  : 1 (pid: 2631)
  error_file: <N/A>
  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html
============================================================
"""


def noise_lines(rng: random.Random, step: int) -> list[str]:
    rank = rng.randrange(RANKS)
    pick = rng.random()
    if pick < 0.55:
        return [f"[rank{rank}]: epoch {step // 5000} step {step} loss {2.3 - step * 1e-5:.4f} lr 3.0e-04 "
                f"grad_norm {rng.uniform(0.5, 2):.3f} tokens/s {rng.randint(90000, 110000)}"]
    if pick < 0.75:
        bars = "".join(f"\r{i:3d}%|{'#' * (i // 10):10s}| {i * 10}/1000 [00:{i:02d}<00:40, 24.1it/s]" for i in range(0, 100, 7))
        return [f"[rank{rank}]: {bars}"]
    if pick < 0.92:
        return [f"node0:{1000 + rank}:{2000 + rank} [{rank}] NCCL INFO Channel {step % 32:02d}/0 : {rank}[{rank}] -> "
                f"{(rank + 1) % RANKS}[{(rank + 1) % RANKS}] via P2P/CUMEM/read"]
    if pick < 0.97:
        return [f"[rank{rank}]: /usr/lib/python3/site-packages/torch/utils/data/dataloader.py:617: UserWarning: "
                "This DataLoader will create 16 worker processes in total.",
                f"[rank{rank}]:   warnings.warn(_create_warning_msg("]
    if pick < 0.999:
        return [f"W1201 09:{step % 60:02d}:00.000000 2606 torch/distributed/run.py:792] OMP_NUM_THREADS set to 1"]
    return [f"[rank{rank}]: tensor([" + ", ".join(f"{rng.uniform(-1, 1):.4f}" for _ in range(7000)) + "])"]


def write_log(path: Path, megabytes: int, seed: int = 0) -> None:
    rng = random.Random(seed)
    target = megabytes * 1_000_000 - len(FAILURE) - 200_000
    step = 0
    with path.open("w", encoding="utf-8") as handle:
        written = 0
        while written < target:
            lines: list[str] = []
            for _ in range(2000):
                step += 1
                lines += noise_lines(rng, step)
            chunk = "\n".join(lines) + "\n"
            handle.write(chunk)
            written += len(chunk)
        handle.write(FAILURE)
        for _ in range(1500):
            handle.write(f"[rank3]: epoch 19 step {step} loss 0.9000\n")


def time_once(log: Path) -> tuple[float, float, float, str]:
    """(wall seconds, CPU seconds, peak RSS MiB of the child, first line of the report)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "mgtutor.tui", "diagnose", str(log)],
                          capture_output=True, text=True, env=dict(os.environ, MGTUTOR_NO_NVML="1"), timeout=600)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    first = next((line for line in proc.stdout.splitlines() if line.startswith("1. ")), proc.stderr.strip()[:200])
    return wall, cpu, after.ru_maxrss / 1024, first  # ru_maxrss: the largest child so far


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=200)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--keep", type=Path, help="write the log here and keep it (reused if it exists)")
    args = parser.parse_args()
    log = args.keep or Path(tempfile.mkdtemp()) / "big.log"
    if not log.exists():
        write_log(log, args.mb)
    print(f"log: {log} ({log.stat().st_size / 1e6:.0f} MB)")
    walls, cpus = [], []
    for run in range(args.runs):
        load = os.getloadavg()[0]
        wall, cpu, rss, first = time_once(log)
        walls.append(wall)
        cpus.append(cpu)
        print(f"run {run + 1}: {wall:.2f} s wall, {cpu:.2f} s CPU, peak RSS {rss:.0f} MiB, load {load:.1f} before; {first}")
    print(f"median {statistics.median(walls):.2f} s wall (min {min(walls):.2f}, max {max(walls):.2f}), "
          f"{statistics.median(cpus):.2f} s CPU, of {len(walls)} runs")
    if not args.keep:
        log.unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main())
