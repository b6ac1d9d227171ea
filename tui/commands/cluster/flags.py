"""The flags that `mgtutor slurm` and `mgtutor k8s` share: the job's shape (nodes x GPUs), its name, the
target after `--`, the network interface, KEY=VALUE environment and the output (-o, --force: options.py)."""
from __future__ import annotations

import argparse

from mgtutor.training.foundation.i18n import _
from mgtutor.tui.commands.options import add_nodes, add_output, command_parser


def job_parser(sub: argparse._SubParsersAction, name: str, help: str, description: str, epilog: str,
               node_is: str) -> argparse.ArgumentParser:
    """A cluster command's parser, its job's shape (nodes x GPUs) first."""
    parser = command_parser(sub, name, help, description, epilog)
    add_nodes(parser, default=2, help=_("{nodes} (default 2)").format(nodes=node_is))
    parser.add_argument("--gpus-per-node", type=int, default=1, metavar="G", help=_("GPUs = ranks per node (default 1)"))
    return parser


def add_job_name(parser: argparse.ArgumentParser, flag: str, help: str) -> None:
    """The job's name, `mgtutor` unless given; `flag` is the scheduler's own word for it."""
    parser.add_argument(flag, default="mgtutor", metavar="NAME", help=_(help))


def add_env_flags(parser: argparse.ArgumentParser, env_is: str) -> None:
    parser.add_argument("--nccl-ifname", default=None, metavar="IF", help=_("{env_is} NCCL_SOCKET_IFNAME=IF").format(env_is=env_is))
    parser.add_argument("--env", action="append", default=[], metavar="KEY=VALUE", help=_("{env_is} KEY=VALUE; repeatable").format(env_is=env_is))


def add_output_and_target(parser: argparse.ArgumentParser) -> None:
    add_output(parser, help=_("write to FILE (default: stdout)"))
    parser.add_argument("target", nargs=argparse.REMAINDER, metavar="-- SCRIPT [ARGS…]",
                        help=_("the script (or -m MODULE) and its arguments, after --"))

