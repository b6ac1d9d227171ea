"""`mgtutor bench allreduce`: all-reduce bandwidth per message size, printed like nccl-tests."""
from __future__ import annotations

import argparse
import json
import sys

from mgtutor.training.foundation.i18n import N_, _
from mgtutor.diagnostics.doctor import saved
from mgtutor.diagnostics.bench.allreduce_bench import (
    HEADER,
    BenchOptions,
    bounds_line,
    collect,
    env_note,
    format_pair,
    start,
)
from mgtutor.diagnostics.schema import errors, load_schema
from mgtutor.training.runs.launch.launcher import said_device_note
from mgtutor.tui.errors import CliError
from mgtutor.tui.run_words import record_line
from mgtutor.tui.options.bench import BENCH_FLAGS, bench_options
from mgtutor.tui.options.flags import OptionError
from mgtutor.tui.commands.options import add_table, started

EPILOG = N_("""examples:
  mgtutor bench allreduce                          8 B … 256 MiB on every GPU (4 MiB on CPU ranks)
  mgtutor bench allreduce -b 8 -e 4G -f 2 --check  the full sweep, results validated (#wrong)
  mgtutor bench allreduce -b 512M -e 2G --iters 50  large messages only: the link's peak
  mgtutor bench allreduce --nproc 2 --backend gloo --json

Columns and formulas follow NVIDIA nccl-tests: algbw = bytes / time; busbw = algbw * 2(n-1)/n,
comparable with the link's bandwidth whatever the rank count.""")


def register(kinds: argparse._SubParsersAction) -> None:
    p = kinds.add_parser("allreduce", help=_("all-reduce bandwidth per message size (like nccl-tests)"),
                         description=_("Sweep message sizes, time out-of-place and in-place all-reduce on N "
                                       "ranks, and relate the bus bandwidth to the GPU link."),
                         epilog=_(EPILOG), formatter_class=argparse.RawDescriptionHelpFormatter)
    add_table(p, BENCH_FLAGS, BenchOptions())
    p.add_argument("--json", action="store_true", help=_("print one JSON object (schema: allreduce_schema.json)"))
    p.set_defaults(func=main)


def options_from(args: argparse.Namespace) -> BenchOptions:
    try:
        return bench_options(vars(args))
    except OptionError as exc:
        raise CliError(str(exc)) from None


def main(args: argparse.Namespace) -> int:
    options = options_from(args)
    run = started(start, options)
    meta = run.record.meta()
    if not args.json:
        print("# mgtutor bench allreduce: " + _("{ranks} rank(s), {backend} — {device}").format(
            ranks=meta.world_size, backend=meta.backend, device=said_device_note(meta)))
        if env_note():
            print(f"# {env_note()}")
        print(HEADER, flush=True)
    on_rows = None if args.json else (lambda rows: print(format_pair(rows), flush=True))
    try:
        report = collect(run, on_rows)
    except KeyboardInterrupt:
        run.stop()
        print("mgtutor: " + _("stopped"), file=sys.stderr)
        return 130
    saved.save("allreduce", report)
    if args.json:
        problems = errors(report, load_schema("allreduce"))
        if problems:  # a bug of ours; say so rather than print a broken contract
            print(f"mgtutor bench allreduce: internal error: output breaks its schema: {problems[0]}", file=sys.stderr)
        print(json.dumps(report, indent=2))
    else:
        if report["avg_busbw_gbps"] is not None:
            print(bounds_line(report["rows"]))
            print(f"# Avg bus bandwidth    : {report['avg_busbw_gbps']:.3f}")
        print(f"# {report.said}")
        print(record_line(run.record.path))
    if report["error"]:
        return 1
    return 1 if any(r["wrong"] for r in report["rows"]) else 0
