"""A script's command-line options, read from its `add_argument` calls without running it, and the ones
`mgtutor fit` needs: the per-rank batch size and the gradient accumulation steps.

Read statically, like every check (the script is parsed, never imported): an option whose name is built
at run time, or one that a config file or HfArgumentParser's dataclass defines, is not seen, and
`mgtutor fit --batch-arg NAME` names it instead.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mgtutor.diagnostics.check.script import CheckError, decode_source, parse, read_script
from mgtutor.diagnostics.check.script_model import constant, keyword
from mgtutor.training.foundation.i18n import _

# the names scripts give a per-device batch, most telling first; "eval", "val", "test" batches are not it
BATCH_DESTS = ("batch_size", "per_device_train_batch_size", "train_batch_size", "micro_batch_size",
               "per_gpu_batch_size", "local_batch_size", "batch_size_per_gpu", "batch", "bs", "mbs")
NOT_TRAINING = re.compile(r"(^|_)(eval|val|valid|validation|test|infer|inference|predict|global|total)(_|$)")
ACCUMULATION = re.compile(r"accum")


@dataclass(frozen=True)
class ScriptOption:
    flags: tuple[str, ...]  # as written: ("-b", "--batch-size")
    dest: str
    default: Any = None  # a constant default, else None
    type_name: str | None = None  # "int", "float", … when `type=` names a builtin
    line: int = 0

    @property
    def flag(self) -> str:
        """The long flag if there is one: what a command line should say."""
        return next((f for f in self.flags if f.startswith("--")), self.flags[0])


def script_options(path: Path) -> list[ScriptOption]:
    """Every `add_argument("--x", …)` of the script (positional arguments left out); CheckError if unreadable."""
    tree = parse(decode_source(read_script(path), str(path)), str(path))
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument"):
            continue
        flags = tuple(str(constant(a)) for a in node.args if isinstance(constant(a), str) and str(constant(a)).startswith("-"))
        if not flags:
            continue
        long_flag = next((f for f in flags if f.startswith("--")), flags[0])
        dest = constant(keyword(node, "dest")) or long_flag.lstrip("-").replace("-", "_")
        kind = keyword(node, "type")
        found.append(ScriptOption(flags, str(dest), constant(keyword(node, "default")),
                                  kind.id if isinstance(kind, ast.Name) else None, node.lineno))
    return sorted(found, key=lambda o: o.line)


def batch_option(options: list[ScriptOption]) -> ScriptOption | None:
    """The per-rank training batch option: a known name first, else the one training option that says batch."""
    training = [o for o in options if not NOT_TRAINING.search(o.dest.lower()) and o.type_name in (None, "int")]
    for name in BATCH_DESTS:
        named = [o for o in training if o.dest.lower() == name]
        if named:
            return named[0]
    loose = [o for o in training if "batch" in o.dest.lower() and ("size" in o.dest.lower() or o.type_name == "int")]
    return loose[0] if len(loose) == 1 else None


def accumulation_option(options: list[ScriptOption]) -> ScriptOption | None:
    """Gradient accumulation steps (`--grad-accum`, `--gradient_accumulation_steps`, `--accum-iter`)."""
    return next((o for o in options if ACCUMULATION.search(o.dest.lower()) and o.type_name in (None, "int")), None)


def named_option(options: list[ScriptOption], name: str) -> ScriptOption | None:
    """The option `--batch-arg` names, by flag (`--bs`, `-b`) or by dest (`bs`)."""
    wanted = name if name.startswith("-") else None
    for option in options:
        if (wanted and wanted in option.flags) or option.dest == name.lstrip("-").replace("-", "_"):
            return option
    return None


def option_called(name: str) -> ScriptOption:
    """An option known only by the name the user gave (`--bs`, `bs`): one the script's text does not show."""
    return ScriptOption((name if name.startswith("-") else f"--{name}",), name.lstrip("-").replace("-", "_"))


def option_value(argv: list[str], option: ScriptOption) -> str | None:
    """The value the command line gives the option (the last one wins, as in argparse), or None."""
    value = None
    for i, arg in enumerate(argv):
        flag, eq, rest = arg.partition("=")
        if flag in option.flags and eq:
            value = rest
        elif arg in option.flags and i + 1 < len(argv):
            value = argv[i + 1]
    return value


def with_option(argv: list[str], option: ScriptOption, value: int | str) -> list[str]:
    """The command line with the option set to `value`: every occurrence replaced, or added at the end."""
    out: list[str] = []
    skip = False
    for i, arg in enumerate(argv):
        if skip:
            skip = False
            continue
        flag, eq, _rest = arg.partition("=")
        if flag in option.flags and eq:
            continue
        if arg in option.flags and i + 1 < len(argv):
            skip = True
            continue
        out.append(arg)
    return [*out, option.flag, str(value)]


def int_or_none(text: Any) -> int | None:
    try:
        return int(text) if text is not None and not isinstance(text, bool) else None
    except (TypeError, ValueError):
        return None


class NoBatchOption(CheckError):
    """The script has no option that could be its batch size (one line, with what to do)."""


def find_batch_option(path: Path, name: str | None = None) -> tuple[ScriptOption, list[ScriptOption]]:
    """The batch option (named, or found) and all the script's options; NoBatchOption with the fix."""
    options = script_options(path)
    if name:
        return named_option(options, name) or option_called(name), options
    chosen = batch_option(options)
    if chosen is None:
        listed = ", ".join(o.flag for o in options) or _("none")
        raise NoBatchOption(_("{script} has no command-line option that looks like its batch size (its options: "
                              "{options}); name it with --batch-arg NAME").format(script=path, options=listed))
    return chosen, options
