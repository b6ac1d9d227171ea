"""The flags and the output that `mgtutor slurm` and `mgtutor k8s` share: the job's shape (nodes x
GPUs), the target after `--`, the network interface, KEY=VALUE environment, and writing the file."""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from mgtutor.tui.errors import CliError


def add_shape_flags(parser: argparse.ArgumentParser, node_is: str) -> None:
    parser.add_argument("--nodes", type=int, default=2, metavar="N", help=f"{node_is} (default 2)")
    parser.add_argument("--gpus-per-node", type=int, default=1, metavar="G", help="GPUs = ranks per node (default 1)")


def add_env_flags(parser: argparse.ArgumentParser, env_is: str) -> None:
    parser.add_argument("--nccl-ifname", default=None, metavar="IF", help=f"{env_is} NCCL_SOCKET_IFNAME=IF")
    parser.add_argument("--env", action="append", default=[], metavar="KEY=VALUE", help=f"{env_is} KEY=VALUE; repeatable")


def add_output_and_target(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-o", "--output", default=None, metavar="FILE", help="write to FILE (default: stdout)")
    parser.add_argument("target", nargs=argparse.REMAINDER, metavar="-- SCRIPT [ARGS…]",
                        help="the script (or -m MODULE) and its arguments, after --")


def write_job_file(text: str, output: str | None, mode: int | None = None) -> Path | None:
    """The text on stdout, or in the file `output` (made executable with mode); CliError if it cannot be written."""
    if output is None:
        sys.stdout.write(text)
        return None
    path = Path(output)
    try:
        path.write_text(text)
        if mode is not None:
            os.chmod(path, mode)
    except OSError as exc:
        raise CliError(f"cannot write {output}: {exc.strerror or exc}") from None
    print(f"wrote {path}", file=sys.stderr)
    return path
