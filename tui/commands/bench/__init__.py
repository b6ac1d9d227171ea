"""`mgtutor bench KIND`: benchmarks. One module per kind: tui/commands/bench/<kind>.py with `register(sub)`."""
from __future__ import annotations

import argparse
import importlib

from mgtutor.training.foundation.i18n import _

BENCH_MODULES: list[str] = ["allreduce", "scaling", "maxbatch"]


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("bench", help=_("measure: all-reduce bandwidth, multi-GPU scaling, the largest batch"),
                            description=_("Benchmarks that run for real on this machine."))
    kinds = parser.add_subparsers(dest="bench_kind", metavar="KIND")
    for name in BENCH_MODULES:
        importlib.import_module(f"mgtutor.tui.commands.bench.{name}").register(kinds)
    parser.set_defaults(func=lambda args: (parser.print_help(), 2)[1])
