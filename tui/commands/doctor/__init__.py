"""`mgtutor doctor`: is this machine ready for multi-GPU training? And `--rendezvous`: can N ranks
meet? The parser is built by small functions so more modes (e.g. multi-node checks) slot in."""
from __future__ import annotations

import argparse
import json
import sys

from mgtutor.diagnostics.doctor import saved
from mgtutor.diagnostics.schema import errors, load_schema
from mgtutor.training.runs.launch.disk import os_error_words
from mgtutor.training.runs.launch.launcher import LaunchError, LaunchSpec, plan
from mgtutor.tui.commands.doctor.peer import EXAMPLES as PEER_EXAMPLES, add_peer_options, run_peer, run_serve
from mgtutor.training.foundation.i18n import N_, _
from mgtutor.tui.errors import CliError
from mgtutor.tui.options.flags import OptionError
from mgtutor.tui.commands.options import add_table
from mgtutor.tui.options.probe import PROBE_FLAGS, ProbeForm

EXAMPLES = N_("""examples:
  mgtutor doctor                          the checklist (paste it into a bug report)
  mgtutor doctor --json                   the same as JSON (schema: doctor_schema.json)
  mgtutor doctor --rendezvous             can 2 ranks (one per GPU) meet, sync and all-reduce?
  mgtutor doctor --rendezvous --nproc 4 --timeout 20 --skip-rank 3   see what a missing rank looks like""")
EXIT_CODES = N_("Exit code: 0 when nothing failed (warnings allowed), 1 when a check failed or a rank never joined.")


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("doctor", help=_("check this machine for multi-GPU training (versions, GPUs, topology, "
                                             "limits)"),
                            description=_("Check everything multi-GPU training needs: versions (torch, CUDA, cuDNN, "
                                          "NCCL, driver), GPUs, their topology (NVLink/PCIe), environment "
                                          "variables, shared memory and limits; each item ✓ (ok), ! (warn) or ✗ "
                                          "(fail), with the fix."),
                            epilog=_(EXAMPLES) + "\n" + _(PEER_EXAMPLES) + "\n\n" + _(EXIT_CODES),
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    add_report_options(parser)
    add_rendezvous_options(parser)
    add_peer_options(parser)
    parser.set_defaults(func=main, doctor_modes=[("rendezvous", run_rendezvous), ("peer", run_peer),
                                                 ("serve", run_serve)])


def add_report_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help=_("print one JSON object instead of text"))


def add_rendezvous_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(_("rendezvous probe"))
    group.add_argument("--rendezvous", action="store_true",
                       help=_("start N ranks that only join, barrier and all-reduce; report each rank's join time"))
    add_table(group, PROBE_FLAGS, ProbeForm())


def main(args: argparse.Namespace) -> int:
    for flag, handler in args.doctor_modes:
        if getattr(args, flag, False):
            return handler(args)
    return run_report(args)


def run_report(args: argparse.Namespace) -> int:
    from mgtutor.diagnostics.doctor.report import collect, render_text, worst

    report = collect()
    keep("doctor", report)
    if args.json:
        problems = errors(report, load_schema("doctor"))
        if problems:
            print(f"mgtutor doctor: internal error: output breaks its schema: {problems[0]}", file=sys.stderr)
        print(json.dumps(report, indent=2))
    else:
        print(render_text(report))
    return 1 if worst(report) == "fail" else 0


def keep(kind: str, report: dict) -> None:
    """Keep the report for the Diagnostics screen; a state folder that cannot be written is said in a
    line (the report itself says why, in its state_folder check), never a traceback."""
    try:
        saved.save(kind, report)
    except OSError as exc:
        print("mgtutor doctor: " + _("this report is not kept for the Diagnostics screen: {why}").format(
            why=os_error_words(exc)), file=sys.stderr)


def run_rendezvous(args: argparse.Namespace) -> int:
    from mgtutor.diagnostics.doctor.rendezvous_probe import format_report, start, wait

    try:
        form = ProbeForm.from_values(vars(args))
        world = plan(LaunchSpec(target=[], nproc=form.nproc, backend=form.backend)).nproc
        options = form.validate(world).options()
        run = start(options)
    except (OptionError, LaunchError) as exc:
        raise CliError(str(exc)) from None
    if not args.json:
        print(_("starting {ranks} rank(s); waiting up to {seconds:g} s for all to join...").format(
            ranks=world, seconds=options.timeout), file=sys.stderr, flush=True)
    try:
        rep = wait(run, options)
    except KeyboardInterrupt:
        run.stop()
        return 130
    keep("rendezvous", rep)
    print(json.dumps(rep, indent=2) if args.json else format_report(rep))
    return 0 if rep["ok"] else 1
