"""`mgtutor run -- SCRIPT ARGS`: any training script on N ranks, logs prefixed `[rank R]`."""
from __future__ import annotations

import argparse
import sys

from mgtutor.training.launcher import BACKENDS, LaunchError, LaunchSpec, Run, launch
from mgtutor.training.multinode import diagnose_node
from mgtutor.training.records import exit_code_for
from mgtutor.tui.commands.check import precheck


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "run", help="run a training script distributed (torchrun), keep a run record",
        description="Run SCRIPT on N ranks with torchrun. Each rank writes its own log files in the run "
                    "record; this command prints them prefixed [rank R] and exits with the first failing "
                    "rank's exit code. Ctrl+C stops every rank.",
        epilog="examples:\n  mgtutor run -- train.py\n  mgtutor run --nproc 4 --backend gloo -- train.py --epochs 2\n"
               "  mgtutor run -- -m mypackage.train --lr 0.1\n"
               "  mgtutor run --nnodes 2 --node-rank 0 --rdzv-endpoint 10.0.0.1:29400 -- train.py   # on 10.0.0.1\n"
               "  mgtutor run --nnodes 2 --node-rank 1 --rdzv-endpoint 10.0.0.1:29400 -- train.py   # on the other node",
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
    nodes = parser.add_argument_group("multi-node (torchrun c10d rendezvous; run the same command on every node)")
    nodes.add_argument("--nnodes", type=int, default=1, metavar="N", help="nodes in the job (default 1)")
    nodes.add_argument("--node-rank", type=int, default=0, metavar="R",
                       help="this node's rank; node 0 is the host of --rdzv-endpoint")
    nodes.add_argument("--rdzv-endpoint", default=None, metavar="HOST:PORT",
                       help="node 0's address and a free port, the same on every node")
    nodes.add_argument("--rdzv-id", default=None, metavar="ID", help="job id, the same on every node")
    nodes.add_argument("--rdzv-timeout", type=int, default=None, metavar="SEC",
                       help="give up when the other nodes have not joined after SEC s (torchrun: 600)")


def node_options(args: argparse.Namespace) -> dict:
    """The LaunchSpec fields that add_launch_options' multi-node flags set."""
    return {"nnodes": args.nnodes, "node_rank": args.node_rank, "rdzv_endpoint": args.rdzv_endpoint,
            "rdzv_id": args.rdzv_id, "rdzv_timeout": args.rdzv_timeout}


def print_node_diagnosis(run: Run, result: dict, err=sys.stderr) -> None:
    """On a multi-node run that never trained: which endpoint is unreachable, or who did not join."""
    meta = run.record.meta()
    if (meta.get("nnodes") or 1) < 2:
        return
    try:
        log = run.record.torchrun_log.read_text(errors="replace")
    except OSError:
        log = ""
    finding = diagnose_node(meta, run.record.ranks(), result.get("status", ""), log)
    if finding:
        print(f"mgtutor: diagnosis ({finding['kind']}): {finding['evidence']}\n  fix: {finding['fix']}", file=err)


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
    precheck(target)  # static check of the script: findings only, never blocks the launch
    try:
        run = launch(LaunchSpec(target=target, nproc=args.nproc, backend=args.backend, label=_label(target),
                                **node_options(args)))
    except LaunchError as exc:
        print(f"mgtutor run: error: {exc}", file=sys.stderr)
        return 2
    meta = run.record.meta()
    print(f"mgtutor: {meta['world_size']} rank(s), backend {meta['backend']} — {meta['device_note']}",
          file=sys.stderr, flush=True)
    if meta.get("nnodes", 1) > 1:
        print(f"mgtutor: node {meta['node_rank']} of {meta['nnodes']}, rendezvous {meta['rdzv_endpoint']} "
              f"id {meta['rdzv_id']}, this node's address {meta.get('local_addr')} on {meta.get('iface')}",
              file=sys.stderr, flush=True)
    result = stream_run(run)
    print(describe_result(result), file=sys.stderr)
    print_node_diagnosis(run, result)
    print(f"run record: {run.record.path}", flush=True)
    return exit_code_for(result)


def _label(target: list[str]) -> str:
    if not target:
        return "run"
    return target[1] if target[0] == "-m" and len(target) > 1 else target[0].rsplit("/", 1)[-1]
