"""The flags and the output that `mgtutor slurm` and `mgtutor k8s` share: the job's shape (nodes x
GPUs), the target after `--`, the network interface, KEY=VALUE environment, and writing the file."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from mgtutor.training.foundation.i18n import _
from mgtutor.training.foundation.safe_io import STDOUT_NAMES, write_output
from mgtutor.tui.errors import CliError


def add_shape_flags(parser: argparse.ArgumentParser, node_is: str) -> None:
    parser.add_argument("--nodes", type=int, default=2, metavar="N", help=_("{nodes} (default 2)").format(nodes=node_is))
    parser.add_argument("--gpus-per-node", type=int, default=1, metavar="G", help=_("GPUs = ranks per node (default 1)"))


def add_env_flags(parser: argparse.ArgumentParser, env_is: str) -> None:
    parser.add_argument("--nccl-ifname", default=None, metavar="IF", help=_("{env_is} NCCL_SOCKET_IFNAME=IF").format(env_is=env_is))
    parser.add_argument("--env", action="append", default=[], metavar="KEY=VALUE", help=_("{env_is} KEY=VALUE; repeatable").format(env_is=env_is))


def add_output_and_target(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-o", "--output", default=None, metavar="FILE", help=_("write to FILE (default: stdout)"))
    parser.add_argument("--force", action="store_true",
                        help=_("replace FILE if it exists (without it an existing FILE is an error)"))
    parser.add_argument("target", nargs=argparse.REMAINDER, metavar="-- SCRIPT [ARGS…]",
                        help=_("the script (or -m MODULE) and its arguments, after --"))


def write_job_file(text: str, output: str | None, mode: int = 0o644, force: bool = False) -> Path | None:
    """The text on stdout (no FILE, or `-`), or in the new file `output` (mode `mode`, less the umask).
    An existing FILE is refused unless `force`; then it is replaced by a rename, so a symlink at FILE is
    replaced, never followed (nothing is written, or chmodded, where it points). A device or FIFO
    (/dev/null) is written in place, never replaced (safe_io.write_output). CliError says why it failed."""
    if output is None or output in STDOUT_NAMES:
        sys.stdout.write(text)
        return None
    try:
        path = write_output(output, text, mode=mode, replace=force)
    except FileExistsError:
        there = (_("{file} is a symlink already: give another -o FILE, or --force to replace it")
                 if Path(output).is_symlink()
                 else _("{file} is there already: give another -o FILE, or --force to replace it"))
        raise CliError(there.format(file=output)) from None
    except OSError as exc:
        raise CliError(_("cannot write {file}: {error}").format(file=output, error=exc.strerror or exc)) from None
    if path is not None:
        print(_("wrote {path}").format(path=path), file=sys.stderr)
    return path
