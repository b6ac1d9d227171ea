"""How fast the log scan (prefilter + Scanner, what `mgtutor diagnose` runs) reads crafted lines, against
plain training noise: 1 MiB files, each of one line repeated, a line built to make one catalogue pattern
try hard (a trigger repeated, or a long run after it). The scanner reads at most MATCH_CHARS of a line.

    python tests/bench/diagnose_crafted_lines.py [--runs 3] [--catalogue failure_catalogue.json]

--catalogue times another version of the catalogue (e.g. `git show REV:diagnostics/failures/failure_catalogue.json`).
"""
from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from mgtutor.diagnostics.failures.catalogue import load_catalogue, parse_catalogue
from mgtutor.diagnostics.failures.logs.blockscan import scan_file
from mgtutor.diagnostics.failures.logs.scan import MATCH_CHARS, Scanner

CRAFTED = {
    "noise (baseline)": "step 100 loss 1.234 lr 0.1 " * 4,
    "rendezvous keys": "wait timeout after 1ms, keys: " + "/cpu/1x" * 1100,
    "shm, repeated": "No space left on device " * 400,
    "torch_ file name": "unable to write to file </torch_" + "a" * 8000,
    "collectives differ": "Collectives differ in the following aspects:" * 180,
    "TCP host": "TCP client failed to connect/validate to host " + "a:1" * 2600,
    "oom-kill, repeated": "oom-kill: " * 800,
    "dump signal at the end": "1" * 8000 + " Received a dump signal due to a collective timeout from this local rank",
    "URLError, repeated": "URLError: <urlopen error " * 300,
    "NCCL INFO, repeated": "NCCL INFO a:1 -> 2 rank 1 " * 300,
}


def seconds_per_mib(catalogue, line: str, runs: int) -> float:
    line = line[:MATCH_CHARS] + "\n"
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "crafted.log"
        path.write_text(line * max(1, (1 << 20) // len(line)))
        times = []
        for _ in range(runs):
            scanner = Scanner(catalogue)
            start = time.perf_counter()
            scan_file(scanner, path)
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--catalogue", type=Path, default=None)
    args = parser.parse_args()
    catalogue = parse_catalogue(json.loads(args.catalogue.read_text())) if args.catalogue else load_catalogue()
    base = None
    for name, line in CRAFTED.items():
        took = seconds_per_mib(catalogue, line, args.runs)
        base = base or took
        print(f"{name:24} {took * 1000:9.1f} ms/MiB  {took / base:6.1f}x the noise")


if __name__ == "__main__":
    main()
