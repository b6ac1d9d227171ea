"""The flags and the output that `mgtutor slurm` and `mgtutor k8s` share: the job's shape (nodes x
GPUs), the target after `--`, the network interface, KEY=VALUE environment, and writing the file."""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from mgtutor.training.foundation.i18n import _
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
    """The text on stdout, or in the new file `output` (mode `mode`, less the umask). An existing
    FILE is refused unless `force`; then it is replaced by a rename, so a symlink at FILE is replaced,
    never followed (nothing is written, or chmodded, where it points). CliError says why it failed."""
    if output is None:
        sys.stdout.write(text)
        return None
    path = Path(output)
    target = path if not force else path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        if force:
            os.replace(target, path)
    except FileExistsError:
        if force:
            raise CliError(_("cannot write {file}: {other} is in the way; remove it").format(
                file=output, other=target.name)) from None
        there = (_("{file} is a symlink already: give another -o FILE, or --force to replace it") if path.is_symlink()
                 else _("{file} is there already: give another -o FILE, or --force to replace it"))
        raise CliError(there.format(file=output)) from None
    except OSError as exc:
        if force:
            try:
                os.unlink(target)
            except OSError:
                pass
        raise CliError(_("cannot write {file}: {error}").format(file=output, error=exc.strerror or exc)) from None
    print(_("wrote {path}").format(path=path), file=sys.stderr)
    return path
