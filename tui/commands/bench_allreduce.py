"""`mgtutor bench allreduce`: all-reduce bandwidth per message size, printed like nccl-tests."""
from __future__ import annotations

import argparse
import json
import sys

from mgtutor.diagnostics.doctor import saved
from mgtutor.diagnostics.bench.allreduce_bench import HEADER, BenchOptions, collect, env_note, format_pair, start
from mgtutor.diagnostics.schema import errors, load_schema
from mgtutor.diagnostics.bench.sizes import canonical_dtype, parse_size
from mgtutor.training.runs.launcher import LaunchError
from mgtutor.tui.errors import CliError

EPILOG = """examples:
  mgtutor bench allreduce                          8 B … 256 MiB on every GPU (4 MiB on CPU ranks)
  mgtutor bench allreduce -b 8 -e 4G -f 2 --check  the full sweep, results validated (#wrong)
  mgtutor bench allreduce -b 512M -e 2G --iters 50  large messages only: the link's peak
  mgtutor bench allreduce --nproc 2 --backend gloo --json

Columns and formulas follow NVIDIA nccl-tests: algbw = bytes / time; busbw = algbw * 2(n-1)/n,
comparable with the link's bandwidth whatever the rank count."""


def _size(text: str) -> int:
    try:
        return parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _dtype(text: str) -> str:
    try:
        return canonical_dtype(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _positive(text: str) -> int:
    value = int(text) if text.lstrip("-").isdigit() else -1
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of at least 1 (got {text!r})")
    return value


def register(kinds: argparse._SubParsersAction) -> None:
    p = kinds.add_parser("allreduce", help="all-reduce bandwidth per message size (like nccl-tests)",
                         description="Sweep message sizes, time out-of-place and in-place all-reduce on N "
                                     "ranks, and relate the bus bandwidth to the GPU link.",
                         epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nproc", type=_positive, default=None, metavar="N", help="ranks (default: one per GPU, or 2 on CPU)")
    p.add_argument("--backend", default="auto", choices=("auto", "nccl", "gloo"))
    p.add_argument("-b", "--minbytes", type=_size, default=8, metavar="SIZE", help="smallest message (default 8)")
    p.add_argument("-e", "--maxbytes", type=_size, default=None, metavar="SIZE",
                   help="largest message (default 256M on GPUs, 4M on CPU)")
    p.add_argument("-f", "--stepfactor", type=float, default=2.0, metavar="F", help="size multiplier (default 2)")
    p.add_argument("-n", "--iters", type=_positive, default=20, help="timed iterations per size (default 20)")
    p.add_argument("-w", "--warmup", type=_positive, default=5, help="untimed iterations per size (default 5)")
    p.add_argument("-d", "--dtype", type=_dtype, default="float",
                   help="float, half, bfloat16, double, int8, uint8, int32, int64 (default float)")
    p.add_argument("-c", "--check", action="store_true", help="validate every result (#wrong column)")
    p.add_argument("--graph", choices=("auto", "on", "off"), default="auto",
                   help="capture the timed calls in a CUDA graph (default auto: when capture works)")
    p.add_argument("--oop", choices=("auto", "nccl", "copy"), default="auto",
                   help="out-of-place method: NCCL called directly (like nccl-tests) or copy + in-place all_reduce")
    p.add_argument("--json", action="store_true", help="print one JSON object (schema: allreduce_schema.json)")
    p.set_defaults(func=main)


def options_from(args: argparse.Namespace) -> BenchOptions:
    if args.stepfactor <= 1:
        raise CliError(f"-f must be more than 1 (got {args.stepfactor})")
    if args.maxbytes is not None and args.maxbytes < args.minbytes:
        raise CliError(f"-e ({args.maxbytes} B) is smaller than -b ({args.minbytes} B)")
    return BenchOptions(nproc=args.nproc, backend=args.backend, min_bytes=args.minbytes, max_bytes=args.maxbytes,
                        factor=args.stepfactor, iters=args.iters, warmup=args.warmup, dtype=args.dtype,
                        check=args.check, graph=args.graph, oop=args.oop)


def _fail(message: str) -> int:
    print(f"mgtutor bench allreduce: error: {message}", file=sys.stderr)
    return 2


def main(args: argparse.Namespace) -> int:
    options = options_from(args)
    try:
        run = start(options)
    except LaunchError as exc:
        return _fail(str(exc))
    meta = run.record.meta()
    if not args.json:
        print(f"# mgtutor bench allreduce: {meta.world_size} rank(s), {meta.backend} — {meta.device_note}")
        if env_note():
            print(f"# {env_note()}")
        print(HEADER, flush=True)
    on_rows = None if args.json else (lambda rows: print(format_pair(rows), flush=True))
    try:
        report = collect(run, on_rows)
    except KeyboardInterrupt:
        run.stop()
        print("mgtutor: stopped", file=sys.stderr)
        return 130
    saved.save("allreduce", report)
    if args.json:
        problems = errors(report, load_schema("allreduce"))
        if problems:  # a bug of ours; say so rather than print a broken contract
            print(f"mgtutor bench allreduce: internal error: output breaks its schema: {problems[0]}", file=sys.stderr)
        print(json.dumps(report, indent=2))
    else:
        if report["avg_busbw_gbps"] is not None:
            print(f"# Out of bounds values : {sum(r['wrong'] or 0 for r in report['rows'])} "
                  f"{'OK' if not any(r['wrong'] for r in report['rows']) else 'FAILED'}")
            print(f"# Avg bus bandwidth    : {report['avg_busbw_gbps']:.3f}")
        print(f"# {report['verdict']}")
        print(f"run record: {run.record.path}")
    if report["error"]:
        return 1
    return 1 if any(r["wrong"] for r in report["rows"]) else 0
