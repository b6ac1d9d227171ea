"""A torch-free stand-in for torchrun, for the run layer's tests of its own plumbing.

`python -m torch.distributed.run` imports torch (about 2 s of CPU on two cores) before it starts a worker;
this program starts the same workers in about 50 ms. It takes the arguments `torchrun_argv` writes and
does what the run layer relies on torchrun for, the way torch elastic's local agent does it:

- each worker in a session of its own, with RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK,
  ROLE_RANK, MASTER_ADDR, MASTER_PORT and TORCHELASTIC_RUN_ID set, and `${local_rank}` filled in through
  string.Template (so `$$` reaches the worker as `$`);
- the first worker that fails ends the others (SIGTERM, then SIGKILL after the grace), and the launcher
  exits 1;
- SIGTERM, SIGINT or SIGHUP to the launcher reach every worker as the same signal, and it exits 1.

It prints no ChildFailedError traceback: what torchrun itself prints, its rendezvous and multi-node
are tested with the real torchrun (tests/README.md lists where). Selected by the `standin_torchrun`
fixture (tests/conftest.py), which sets MGTUTOR_LAUNCHER for the test.
"""
from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from string import Template

GRACE_S = 30.0  # torch elastic's close() waits 30 s for its workers before it kills them
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="standin-torchrun")
    parser.add_argument("--nproc-per-node", type=int, default=1)
    parser.add_argument("--nnodes", default="1")
    parser.add_argument("--node-rank", type=int, default=0)
    parser.add_argument("--rdzv-backend", default="c10d")
    parser.add_argument("--rdzv-endpoint", default="127.0.0.1:29500")
    parser.add_argument("--rdzv-id", default="none")
    parser.add_argument("--local-addr", default=None)
    parser.add_argument("--max-restarts", type=int, default=0)
    parser.add_argument("-m", "--module", action="store_true")
    parser.add_argument("script")
    parser.add_argument("script_args", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    if args.nnodes != "1":
        parser.error("the stand-in runs one node only: multi-node tests use the real torchrun")
    return args


def unblock_stops() -> None:
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)


def start_workers(args: argparse.Namespace) -> list[subprocess.Popen[bytes]]:
    host, _, port = args.rdzv_endpoint.rpartition(":")
    workers = []
    for local_rank in range(args.nproc_per_node):
        env = dict(os.environ, RANK=str(local_rank), LOCAL_RANK=str(local_rank), GROUP_RANK="0", ROLE_RANK=str(local_rank),
                   WORLD_SIZE=str(args.nproc_per_node), LOCAL_WORLD_SIZE=str(args.nproc_per_node),
                   MASTER_ADDR=host, MASTER_PORT=port, TORCHELASTIC_RUN_ID=args.rdzv_id)
        filled = [Template(arg).safe_substitute(local_rank=str(local_rank)) for arg in args.script_args]
        target = ["-m", args.script] if args.module else [args.script]
        workers.append(subprocess.Popen([sys.executable, "-u", *target, *filled], env=env, start_new_session=True,
                                        preexec_fn=unblock_stops))
    return workers


def close(workers: list[subprocess.Popen[bytes]], signum: int) -> None:
    for worker in workers:
        if worker.poll() is None:
            worker.send_signal(signum)
    deadline = time.monotonic() + GRACE_S
    for worker in workers:
        try:
            worker.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()


def monitor(workers: list[subprocess.Popen[bytes]], stops: list[int]) -> int:
    """Until every worker has exited, the first one fails, or a stop signal was noted (`stops`: the signal
    handler only notes; one that raised could land inside Popen.poll, between its lock and the `try` that
    frees it, and the close's wait would then block for ever)."""
    while True:
        if stops:
            print(f"standin-torchrun: stopped on {signal.Signals(stops[0]).name}; stopping the workers", file=sys.stderr)
            close(workers, stops[0])
            return 1
        codes = [worker.poll() for worker in workers]
        failed = [(rank, code) for rank, code in enumerate(codes) if code not in (None, 0)]
        if failed:
            rank, code = failed[0]
            print(f"standin-torchrun: rank {rank} failed (exit code {code}); stopping the others", file=sys.stderr)
            close(workers, signal.SIGTERM)
            return 1
        if all(code == 0 for code in codes):
            return 0
        time.sleep(0.05)


def main(argv: list[str]) -> int:
    args = parse(argv)
    stops: list[int] = []

    def on_signal(signum: int, _frame: object) -> None:
        if not stops:  # one stop at a time: the close it starts is that stop
            stops.append(signum)

    for sig in STOP_SIGNALS:
        signal.signal(sig, on_signal)
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)  # a stop waits until every worker is known
    try:
        workers = start_workers(args)
    finally:
        unblock_stops()
    return monitor(workers, stops)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
