"""The options every command shares, declared once: ranks (`--nproc`), the backend, nodes (`--nodes`,
alias `--nnodes`), the rendezvous port (`--rdzv-port`, alias `--port`) and where output goes (`-o FILE`,
`-o -`, `--force`). A command adds them with these functions, so a name, its choices, its validation and
its help read the same in every command; a command's own options stay in its module.

A bad value is one line and exit status 2 (`mgtutor run: error: --nproc must be …`), without argparse's
usage block, the same in every command."""
from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from mgtutor.training.foundation.i18n import N_, _
from mgtutor.training.foundation.safe_io import STDOUT_NAMES, write_output
from mgtutor.training.runs.launch.launcher import BACKENDS, LaunchError
from mgtutor.tui.errors import CliError
from mgtutor.tui.options.flags import Flag, OptionError, add_flags, positive_int

NPROC_HELP = N_("ranks to start (default: one per GPU, or 2 CPU ranks without GPUs)")
BACKEND_HELP = N_("NCCL on GPUs, gloo on CPUs; auto picks NCCL when a GPU is present")
NODES_HELP = N_("nodes in the job (default {default})")
FORCE_HELP = N_("replace FILE if it exists (without it an existing FILE is an error)")
NODES_NAMES = ("--nodes", "--nnodes")  # --nnodes: torchrun's spelling
RDZV_PORT_NAMES = ("--rdzv-port", "--port")  # --port: the spelling before --rdzv-port


def port_number(text: str) -> int:
    value = int(text) if text.strip().isdigit() else -1
    if not 1 <= value <= 65535:
        raise OptionError(_("must be a port number, 1…65535 (got {text!r})").format(text=text))
    return value


def backend_name(text: str) -> str:
    if text not in BACKENDS:
        raise OptionError(_("must be one of {choices} (got {text!r})").format(choices=", ".join(BACKENDS), text=text))
    return text


class _Checked(argparse.Action):
    """Converts with `self.check`; a bad value ends the command with one line, exit status 2."""

    check: Callable[[str], Any]

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        try:
            setattr(namespace, self.dest, self.check(str(values)))
        except OptionError as exc:
            command = parser.prog.removeprefix("mgtutor").strip() or "mgtutor"
            parser.exit(2, _("mgtutor {command}: error: {message}").format(
                command=command, message=f"{option_string} {exc}") + "\n")


def _checked(check: Callable[[str], Any]) -> type[argparse.Action]:
    return type(f"Checked_{check.__name__}", (_Checked,), {"check": staticmethod(check)})


Parser = argparse.ArgumentParser | argparse._ArgumentGroup


def add_nproc(parser: Parser, default: int | None = None, help: str = NPROC_HELP) -> None:
    """`--nproc N`: ranks, a whole number of at least 1 (`default` None: one per GPU, or 2 on CPU)."""
    parser.add_argument("--nproc", action=_checked(positive_int), default=default, metavar="N", help=_(help))


def add_backend(parser: Parser, help: str = BACKEND_HELP) -> None:
    """`--backend auto|nccl|gloo`, default auto."""
    parser.add_argument("--backend", action=_checked(backend_name), default="auto",
                        metavar="{" + ",".join(BACKENDS) + "}", help=_(help))


def add_nodes(parser: Parser, default: int, dest: str = "nodes", help: str = NODES_HELP) -> None:
    """`--nodes N`, alias `--nnodes N`: the nodes of a job, a whole number of at least 1."""
    parser.add_argument(*NODES_NAMES, dest=dest, action=_checked(positive_int), default=default, metavar="N",
                        help=_(help).format(default=default))


def add_rdzv_port(parser: Parser, default: int, help: str) -> None:
    """`--rdzv-port PORT`, alias `--port PORT`: the port of the c10d rendezvous on the first node."""
    parser.add_argument(*RDZV_PORT_NAMES, dest="rdzv_port", action=_checked(port_number), default=default,
                        metavar="PORT", help=_(help).format(port=default))


def add_listen_port(parser: Parser, default: int, help: str) -> None:
    """`--port PORT`: the port this command itself listens on (serve, doctor --serve); `help` says which."""
    parser.add_argument("--port", action=_checked(port_number), default=default, metavar="PORT",
                        help=_(help).format(port=default))


def add_table(parser: Parser, flags: Sequence[Flag], defaults: Any) -> None:
    """A flag table shared with a screen (tui/options), its --nproc and --backend declared as here."""
    for flag in flags:
        if flag.dest == "nproc":
            add_nproc(parser, default=getattr(defaults, "nproc"), help=flag.help)
        elif flag.dest == "backend":
            add_backend(parser, help=flag.help)
    add_flags(parser, [f for f in flags if f.dest not in ("nproc", "backend")], defaults)


def add_output(parser: Parser, help: str, metavar: str = "FILE", force_help: str = FORCE_HELP,
               force_in: Parser | None = None) -> None:
    """`-o FILE` (`-o -`: standard output) and `--force` (in `force_in` when -o is in a group of
    exclusive options); write with `write_output_file`."""
    parser.add_argument("-o", "--output", default=None, metavar=metavar, help=_(help))
    (force_in or parser).add_argument("--force", action="store_true", help=_(force_help))


def refuse_existing(output: str | None, force: bool) -> None:
    """CliError when `-o FILE` names a regular file (or a symlink to one, or a dangling one) that is there and
    `--force` is not given. A device or FIFO (/dev/null, a link to it) is where output is meant to go."""
    if output is None or output in STDOUT_NAMES or force:
        return
    path = Path(output).expanduser()
    if path.is_file() or (path.is_symlink() and not path.exists()):
        there = (_("{file} is a symlink already: give another -o FILE, or --force to replace it")
                 if path.is_symlink()
                 else _("{file} is there already: give another -o FILE, or --force to replace it"))
        raise CliError(there.format(file=output))


def write_output_file(text: str, output: str | None, force: bool, mode: int = 0o644,
                      never: Sequence[Path] = (), say: bool = True) -> Path | None:
    """The text on stdout (no FILE, or `-`), or in FILE (mode `mode`, less the umask). An existing FILE is
    refused unless `force`; then a regular file is replaced by a rename (a symlink at FILE is replaced,
    never followed); a device or FIFO (/dev/null) is written in place (safe_io.write_output). `never`:
    files not to be replaced even with `force` (a command's input). `say`: "wrote FILE" on stderr.
    CliError says why it failed."""
    if output is None or output in STDOUT_NAMES:
        sys.stdout.write(text)
        sys.stdout.flush()
        return None
    target = Path(output).expanduser()
    if any(target.exists() and p.exists() and target.samefile(p) for p in never):
        raise CliError(_("-o {file} is the input; give another file").format(file=output))
    refuse_existing(output, force)
    try:
        path = write_output(target, text, mode=mode, replace=force)
    except FileExistsError:
        refuse_existing(output, force=False)  # made meanwhile
        raise
    except OSError as exc:
        raise CliError(_("cannot write {file}: {error}").format(file=output, error=exc.strerror or exc)) from None
    if path is not None and say:
        print(_("wrote {path}").format(path=path), file=sys.stderr)
    return path


def command_parser(sub: argparse._SubParsersAction, name: str, help: str, description: str,
                   epilog: str | None = None) -> argparse.ArgumentParser:
    """A command's parser: its one-line help, its description and its examples (kept as written, line for
    line), each given as the English message and said in the language in force. An epilog writes "%" as
    {percent}, which gettext's tools would take for a format of their own."""
    said = _(epilog).format(percent="%") if epilog else None
    return sub.add_parser(name, help=_(help), description=_(description), epilog=said,
                          formatter_class=argparse.RawDescriptionHelpFormatter)


def started(start: Callable[[Any], Any], options: Any) -> Any:
    """A run started by `start(options)`, or the launcher's refusal as a one-line error."""
    try:
        return start(options)
    except LaunchError as exc:
        raise CliError(str(exc)) from None
