"""`mgtutor run -- SCRIPT ARGS`: any training script on N ranks, logs prefixed `[rank R]`."""
from __future__ import annotations

import argparse
import sys

from mgtutor.training.launcher import BACKENDS, LaunchError, LaunchSpec, Run, launch
from mgtutor.training.records import exit_code_for


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "run", help="run a training script distributed (torchrun), keep a run record",
        description="Run SCRIPT on N ranks with torchrun. Each rank writes its own log files in the run "
                    "record; this command prints them prefixed [rank R] and exits with the first failing "
                    "rank's exit code. Ctrl+C stops every rank.",
        epilog="examples:\n  mgtutor run -- train.py\n  mgtutor run --nproc 4 --backend gloo -- train.py --epochs 2\n"
               "  mgtutor run -- -m mypackage.train --lr 0.1",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    add_launch_options(parser)
    parser.add_argument("target", nargs=argparse.REMAINDER, metavar="-- SCRIPT [ARGS…]",
                        help="the script (or -m MODULE) and its arguments, after --")
    parser.set_defaults(func=main)


def add_launch_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--nproc", type=int, default=None, metavar="N",
                        help="ranks to start (default: one per GPU, or 2 CPU ranks without GPUs)")
    parser.add_argument("--backend", default="auto", metavar="{auto,nccl,gloo}",
                        help="NCCL on GPUs, gloo on CPUs; auto picks NCCL when a GPU is present")


def stream_run(run: Run, out=sys.stdout) -> dict:
    """Print every line prefixed with its rank until the run ends; Ctrl+C stops every rank."""
    try:
        for rank, _stream, line in run.lines():
            prefix = "[torchrun]" if rank is None else f"[rank {rank}]"
            print(f"{prefix} {line}", file=out, flush=True)
        return run.wait()
    except KeyboardInterrupt:
        print("\nmgtutor: stopping every rank…", file=sys.stderr, flush=True)
        result = run.stop()
        for rank, _stream, line in run.tail.drain():
            print(f"{'[torchrun]' if rank is None else f'[rank {rank}]'} {line}", file=out)
        stop = result.get("stop", {})
        print(f"mgtutor: stopped; {'no process left' if stop.get('clean') else 'processes left: ' + str(stop.get('survivors'))}",
              file=sys.stderr)
        return result


def describe_result(result: dict) -> str:
    first = result.get("first_failure")
    if first:
        how = f"signal {first['signal']}" if first.get("signal") else f"exit code {first['exit_code']}"
        return f"run failed: rank {first['rank']} failed first ({how})"
    return f"run {result.get('status')} in {result.get('duration_s')} s on {result.get('world_size')} " \
           f"{result.get('backend')} rank(s)"


def main(args: argparse.Namespace) -> int:
    target = args.target[1:] if args.target[:1] == ["--"] else args.target
    try:
        run = launch(LaunchSpec(target=target, nproc=args.nproc, backend=args.backend, label=_label(target)))
    except LaunchError as exc:
        print(f"mgtutor run: error: {exc}", file=sys.stderr)
        return 2
    meta = run.record.meta()
    print(f"mgtutor: {meta['world_size']} rank(s), backend {meta['backend']} — {meta['device_note']}",
          file=sys.stderr, flush=True)
    result = stream_run(run)
    print(describe_result(result), file=sys.stderr)
    print(f"run record: {run.record.path}", flush=True)
    return exit_code_for(result)


def _label(target: list[str]) -> str:
    if not target:
        return "run"
    return target[1] if target[0] == "-m" and len(target) > 1 else target[0].rsplit("/", 1)[-1]
