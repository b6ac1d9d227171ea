"""How long `mgtutor run` takes to name ranks that cannot reach their rendezvous store (issue 44, run
diagnosis 2: "name it live within 30 s"). The DDP tutorial's mp.spawn script on 2 gloo ranks
(tests/data/run_failures/spawn_under_torchrun), its store port held by a loopback listener that accepts and
closes every connection (torch prints `… - retrying`), or by a socket bound and never listening (every
connection refused, torch says nothing: the hang watch's stacks tell it).

    python tests/bench/store_warning_time.py [--runs 3]

Prints, for each case and run, the seconds from the launch and from torch's first `retrying` line to the
warning, and the median.
"""
from __future__ import annotations

import argparse
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from conftest import mgtutor_argv, no_gpu_env  # noqa: E402
from tests.test_diagnosis_real_store import WARNING, script_with_port, store_that_drops  # noqa: E402


def time_to_warning(script: Path) -> tuple[float, float | None]:
    start = time.monotonic()
    proc = subprocess.Popen(mgtutor_argv("run", "--nproc", "2", "--", "train.py"), cwd=script.parent,
                            env=no_gpu_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    first_retry = None
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if first_retry is None and "- retrying (try=" in line:
                first_retry = time.monotonic()
            if WARNING in line:
                now = time.monotonic()
                return now - start, (now - first_retry) if first_retry else None
        raise SystemExit("the run ended without the warning")
    finally:
        proc.send_signal(2)
        try:
            proc.wait(90)
        except subprocess.TimeoutExpired:
            proc.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    for case in ("drops (torch says retrying)", "refuses (torch says nothing)"):
        took = []
        for run in range(args.runs):
            with tempfile.TemporaryDirectory() as folder:
                if case.startswith("drops"):
                    with store_that_drops() as port:
                        took.append(time_to_warning(script_with_port(Path(folder), port)))
                else:
                    with socket.socket() as holder:
                        holder.bind(("127.0.0.1", 0))
                        took.append(time_to_warning(script_with_port(Path(folder), holder.getsockname()[1])))
            since_retry = f", {took[-1][1]:.1f} s after the first retry" if took[-1][1] is not None else ""
            print(f"{case}, run {run + 1}: {took[-1][0]:.1f} s after the launch{since_retry}", flush=True)
        print(f"{case}: median {statistics.median(t for t, _ in took):.1f} s after the launch")


if __name__ == "__main__":
    main()
