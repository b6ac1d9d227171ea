"""`mgtutor` command line: no arguments starts the TUI; subcommands reach every capability headless."""
from __future__ import annotations

import argparse
import importlib
import sys

from mgtutor.tui.commands import COMMAND_MODULES
from mgtutor.tui.errors import CliError

EPILOG = """examples:
  mgtutor                                      start the tutor (TUI)
  mgtutor lessons list                         the path from one GPU to many, with your progress
  mgtutor doctor                               is this machine ready? versions, GPUs, topology, limits
  mgtutor train --model resnet18 --steps 200   DDP training on every GPU (CPU ranks on gloo without one)
  mgtutor run --nproc 2 -- train.py --lr 0.1   run your own script on 2 ranks, logs prefixed [rank R]
  mgtutor bench allreduce -b 8 -e 1G           all-reduce bandwidth, nccl-tests style
  mgtutor check train.py                       the classic multi-GPU mistakes in a script, before it runs
  mgtutor diagnose                             why did the last run fail or hang? cause, evidence, fix
  mgtutor runs                                 past runs, newest first

Without an NVIDIA GPU every command still works: ranks are CPU processes on the gloo backend.
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mgtutor",
        description="From one GPU to many: lessons that run for real, distributed launch, live meters, "
                    "NCCL diagnostics and failure diagnosis.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(f"mgtutor.tui.commands.{name}").register(sub)
    return parser


def command_name(args: argparse.Namespace) -> str:
    """"bench allreduce" for the command whose module is commands/bench_allreduce.py."""
    module = getattr(args.func, "__module__", "")
    return module.rsplit(".", 1)[-1].replace("_", " ") if module.startswith("mgtutor.tui.commands.") else args.command


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.version:
        from importlib.metadata import version
        print(f"mgtutor {version('mgtutor')}")
        return 0
    if not args.command:
        from mgtutor.tui.app import run_app
        return run_app()
    try:
        return args.func(args)
    except CliError as exc:
        print(f"mgtutor {command_name(args)}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
