"""`mgtutor convert SCRIPT`: a one-GPU training script made a DDP script that torchrun runs, shown as
a diff of the user's own lines (default), written to a new file (-o), or in place (--fix)."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from mgtutor.training.foundation.i18n import N_, _
from mgtutor.training.foundation.safe_io import STDOUT_NAMES
from mgtutor.tui.commands.check import printable, printable_diff
from mgtutor.tui.commands.options import add_output, refuse_existing, write_output_file
from mgtutor.tui.errors import CliError


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "convert", help=_("turn a one-GPU training script into a DDP script for torchrun (shows a diff)"),
        description=_("Read SCRIPT (never run it) and rewrite it for DDP under torchrun: the process group from "
                      "torchrun's environment (NCCL and this rank's GPU where there are GPUs, gloo on the CPU "
                      "otherwise), joined where the script picks its device, the model wrapped in DDP, a "
                      "DistributedSampler for the training DataLoader (its shuffle moved into it) with set_epoch, "
                      "prints and checkpoints on rank 0, .module where the model's state_dict is saved or loaded, "
                      "and destroy_process_group at the end. A flat script (no __main__ block) is converted too; "
                      "DataParallel gives way to DDP. Comments and layout of the lines it does not change stay as "
                      "they are. What it cannot convert safely it leaves alone and lists, with the line and "
                      "why.\n\n"
                      "By default the change is shown as a unified diff and nothing is written; -o writes a new "
                      "file (an existing one only with --force, never SCRIPT itself; -o - prints the script); "
                      "--fix rewrites SCRIPT in place.\n\n"
                      "Exit status: 0 converted, 1 converted with parts left to do by hand, 2 cannot be read "
                      "or converted."),
        epilog=_("examples:\n  mgtutor convert train.py\n  mgtutor convert train.py -o train_ddp.py\n"
                 "  mgtutor run --nproc 2 -- train_ddp.py"),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("script", metavar="SCRIPT", help=_("the one-GPU training script to convert"))
    where = parser.add_mutually_exclusive_group()
    add_output(where, help=N_("write the DDP script to this new file (-: standard output)"), metavar="NEW.py",
               force_help=N_("replace NEW.py if it exists (never SCRIPT itself)"), force_in=parser)
    where.add_argument("--fix", action="store_true", help=_("rewrite SCRIPT in place"))
    parser.add_argument("--json", action="store_true",
                        help=_('print {"file", "changed", "diff", "done": [...], "not_converted": [{line, why}]}'))
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from mgtutor.diagnostics.check.convert.to_ddp import convert_source
    from mgtutor.diagnostics.check.fix.apply import unified_diff, write_text
    from mgtutor.diagnostics.check.script import CheckError, decode_source, read_script

    path = Path(args.script)
    output = Path(args.output) if args.output else None
    if args.output in STDOUT_NAMES and args.json:
        raise CliError(_("-o {output} and --json both write to standard output; give -o FILE").format(
            output=args.output))
    if output is not None and output.exists() and path.exists() and output.samefile(path):
        raise CliError(_("-o {output} is SCRIPT itself; --fix rewrites it in place").format(output=args.output))
    refuse_existing(args.output, args.force)
    try:
        data = read_script(path)
        report = convert_source(decode_source(data, str(path)), str(path))
    except CheckError as exc:
        raise CliError(str(exc)) from None
    diff = unified_diff(report.before, report.after, str(path))
    try:
        if args.fix:
            write_text(path, report.after, data)
        elif args.output is not None:
            write_output_file(report.after, args.output, force=args.force, mode=0o644, say=False)
    except OSError as exc:
        raise CliError(_("cannot write the converted script: {error}").format(error=exc.strerror or exc)) from None
    if args.json:
        print(json.dumps(report.to_json() | {"diff": diff, "written": str(output or (path if args.fix else ""))},
                         indent=2))
        return 1 if report.not_converted else 0
    if args.output in STDOUT_NAMES:
        return 1 if report.not_converted else 0  # stdout is the script alone
    if not args.fix and output is None:
        print(printable_diff(diff), end="")
    target = output or (path if args.fix else None)
    print(f"{printable(str(path))}: " + (_("converted for DDP, written to {file}").format(file=printable(str(target)))
                                         if target else _("converted for DDP (shown as a diff; -o NEW.py or --fix writes it)")))
    for line in report.done:
        print("  " + _("done:") + f" {printable(line)}")
    for lineno, why in report.not_converted:
        print("  " + _("by hand: line {line}:").format(line=lineno) + f" {printable(why)}")
    print("  " + _("run it:") + f" mgtutor run --nproc 2 -- {printable(str(target or path))}")
    return 1 if report.not_converted else 0
