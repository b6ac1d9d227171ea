"""`mgtutor` command line: no arguments starts the TUI; subcommands reach every capability headless."""
from __future__ import annotations

import argparse
import importlib
import sys

from mgtutor.lessons.progress import start_language
from mgtutor.training.foundation.i18n import LANGUAGES, N_, _, set_language
from mgtutor.tui.commands import COMMAND_MODULES
from mgtutor.tui.errors import CliError
from mgtutor.tui.help_words import name_positionals, speak_argparse, wrap_by_cells

COMMANDS = "mgtutor.tui.commands."
LANG_HELP = N_("the language of what mgtutor prints and shows: zh (简体中文) or en; by default the one "
               "chosen in the app, else the locale (LANGUAGE, LC_ALL, LC_MESSAGES, LANG)")

# One message per example, so that a new command's line needs one new translation.
EXAMPLES = [
    ("mgtutor", N_("start the tutor (TUI)")),
    ("mgtutor lessons list", N_("the path from one GPU to many, with your progress")),
    ("mgtutor doctor", N_("is this machine ready? versions, GPUs, topology, limits")),
    ("mgtutor train --model resnet18 --steps 200", N_("DDP training on every GPU (CPU ranks on gloo without one)")),
    ("mgtutor run --nproc 2 -- train.py --lr 0.1", N_("run your own script on 2 ranks, logs prefixed [rank R]")),
    ("mgtutor bench allreduce -b 8 -e 1G", N_("all-reduce bandwidth, nccl-tests style")),
    ("mgtutor check train.py", N_("the classic multi-GPU mistakes in a script, before it runs")),
    ("mgtutor convert train.py -o train_ddp.py", N_("a one-GPU script made a DDP script for torchrun")),
    ("mgtutor diagnose", N_("why did the last run fail or hang? cause, evidence, fix")),
    ("mgtutor runs", N_("past runs, newest first")),
]
NOTES = (N_("Without an NVIDIA GPU every command still works: ranks are CPU processes on the gloo backend."),
         N_("Language: --lang zh|en, or the locale (LANG=zh_CN.UTF-8 mgtutor); --json output is always English."))


def epilog() -> str:
    """The examples and notes under `mgtutor --help`, in the language in force."""
    lines = [_("examples:")] + [f"  {command:<44} {_(what)}" for command, what in EXAMPLES]
    return "\n".join(lines + [""] + [_(note) for note in NOTES]) + "\n"


def named_command(argv: list[str]) -> str | None:
    """The command a command line names (`runs` in `mgtutor --lang zh runs list`), read before parsing; None for
    the top-level help, the app (no command) or a word that is no command's name."""
    index = 0
    while index < len(argv):
        word = argv[index]
        if word in ("-h", "--help", "--"):
            return None
        index += 2 if word == "--lang" else 1
        if not word.startswith("-"):
            return word
    return None


def command_modules(argv: list[str] | None) -> list[str]:
    """The modules whose commands the parser needs: only the named command's when there is one, so that a quick
    command (`runs list`) does not import what others need (libcst for `check`, the launcher for `run`):
    0.3 s of every start. The top-level help, the app and a mistyped command need them all."""
    by_name = {module.rsplit(".", 1)[-1]: module for module in COMMAND_MODULES}
    name = named_command(argv) if argv is not None else None
    return [by_name[name]] if name in by_name else COMMAND_MODULES


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The command line's parser; given the command line, with only the command it names."""
    speak_argparse()
    parser = argparse.ArgumentParser(
        prog="mgtutor",
        description=_("From one GPU to many: lessons that run for real, distributed launch, live meters, "
                      "NCCL diagnostics and failure diagnosis."),
        epilog=epilog(), formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="store_true", help=_("print the version and exit"))
    parser.add_argument("--lang", choices=LANGUAGES, help=_(LANG_HELP))
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in command_modules(argv):
        importlib.import_module(f"mgtutor.tui.commands.{name}").register(sub)
    name_positionals(parser)
    wrap_by_cells(parser)
    return parser


def command_name(args: argparse.Namespace) -> str:
    """"bench allreduce" for the command whose module is commands/bench/allreduce.py (a family's folder,
    such as cluster/, is not part of the name)."""
    module = getattr(args.func, "__module__", "")
    if not module.startswith(COMMANDS):
        return args.command
    return module[len(COMMANDS):].removeprefix("cluster.").replace(".", " ").replace("_", " ")


def language_flag(argv: list[str]) -> str | None:
    """`--lang` read before the whole command line is parsed; a bad value is left to the parser's error."""
    early = argparse.ArgumentParser(prog="mgtutor", add_help=False)
    early.add_argument("--lang")
    try:
        known, _rest = early.parse_known_args(argv[:argv.index("--")] if "--" in argv else argv)
    except SystemExit:  # `--lang` with no value: the real parser says so
        return None
    return known.lang if known.lang in LANGUAGES else None


def replace_unencodable(*streams: object) -> None:
    """A terminal or pipe that is not UTF-8 (PYTHONIOENCODING=ascii, a C locale without coercion) gets
    `?` for a character it cannot encode, instead of UnicodeEncodeError in the middle of the output."""
    for stream in streams:
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None and getattr(stream, "errors", None) in ("strict", "surrogateescape"):
            reconfigure(errors="replace")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    replace_unencodable(sys.stdout, sys.stderr)
    start_language(language_flag(argv))  # before the parser: its --help is in that language
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    if getattr(args, "json", False):
        set_language("en")  # JSON is a contract for scripts: its keys and values never change language
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
        print(_("mgtutor {command}: error: {message}").format(command=command_name(args), message=exc), file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
