"""`mgtutor report RUN_ID [-o FILE] [--markdown] [--redact-hosts]`: a run to hand to someone."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from mgtutor.training.foundation.i18n import N_, _
from mgtutor.training.runs.records.record import RunRecord, find_run, list_runs, runs_root
from mgtutor.training.foundation.safe_io import STDOUT_NAMES
from mgtutor.tui.commands.options import add_output, refuse_existing
from mgtutor.tui.errors import CliError

EPILOG = N_("""examples:
  mgtutor report                                the newest run, as report.html in its run folder
  mgtutor report 1a2b -o ~/hang.html            a run by (part of) its id, to a file of your choice
  mgtutor report 1a2b --markdown -o issue.md    the body of a GitHub issue (PyTorch's and NCCL's fields)
  mgtutor report 1a2b --redact-hosts            host names and addresses replaced (host-1, addr-1)

The HTML file opens offline in any browser: its styles and charts (SVG) are inside it, nothing is
fetched. Secret-looking variables (a name with TOKEN, KEY, SECRET, PASSWORD, …) are never shown, and
their values are taken out of the logs too. The doctor report in it is taken now (--doctor saved: the
last `mgtutor doctor`; none: leave it out).""")


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "report", help=_("one HTML file (or a GitHub issue body) with everything about a run"),
        description=_("Write a run's report: its command and ranks, the diagnosis with evidence and fix, the hang "
                      "report (every rank's stack and Flight Recorder entries), charts over time per rank and per "
                      "GPU, the doctor report, the environment, and each rank's last lines with the first error "
                      "marked. Prints the file's path."),
        epilog=_(EPILOG), formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_id", nargs="?", metavar="RUN_ID", help=_("a run id, a unique part of it, or its folder "
                                                                      "(default: the newest run)"))
    add_output(parser, help=N_("where to write it (-: standard output). Without -o: report.html (issue.md with "
                               "--markdown) in the run's folder, replaced if it is there"))
    parser.add_argument("--markdown", action="store_true",
                        help=_("the body of a GitHub issue instead: logs in collapsed <details>, ≤ 65,536 characters"))
    parser.add_argument("--redact-hosts", action="store_true",
                        help=_("replace host names and IP addresses by host-1, addr-1, …"))
    parser.add_argument("--doctor", choices=("fresh", "saved", "none"), default="fresh",
                        help=_("the doctor report: taken now (default, a few seconds), the last saved one, or none"))
    parser.add_argument("--json", action="store_true", help=_('print {"path": …, "bytes": …} for scripts'))
    parser.set_defaults(func=main)


def resolve_run(ref: str | None) -> RunRecord:
    if not ref:
        newest = next(iter(list_runs()), None)
        if newest is None:
            raise CliError(_("no runs yet in {folder}; start one with `mgtutor run -- SCRIPT`").format(folder=runs_root()))
        return newest
    path = Path(ref).expanduser()
    if path.is_dir() and (path / "meta.json").exists():
        return RunRecord(path)
    record = find_run(ref)
    if record is None:
        raise CliError(_("no single run matches {ref!r} in {folder} (see `mgtutor runs`)").format(ref=ref,
                                                                                              folder=runs_root()))
    return record


def main(args: argparse.Namespace) -> int:
    from mgtutor.diagnostics.report.render import write_report

    record = resolve_run(args.run_id)
    to_stdout = args.output in STDOUT_NAMES
    if to_stdout and args.json:
        raise CliError(_("-o {output} and --json both write to standard output; give -o FILE").format(
            output=args.output))
    if args.output and not to_stdout and Path(args.output).expanduser().is_dir():
        raise CliError(_("-o {output}: that is a folder; give a file name, e.g. {example}").format(
            output=args.output, example=args.output.rstrip("/") + "/report.html"))
    refuse_existing(args.output, args.force)
    if not args.json:
        reading = (_("reading run {id}; taking the doctor report (a few seconds)…") if args.doctor == "fresh"
                   else _("reading run {id}…"))
        print("mgtutor report: " + reading.format(id=record.run_id), file=sys.stderr, flush=True)
    try:
        path = write_report(record, args.output, markdown=args.markdown, redact_hosts=args.redact_hosts,
                           doctor=args.doctor)
    except OSError as exc:
        raise CliError(_("cannot write the report: {error} ({file})").format(error=exc.strerror or exc,
                                                                              file=exc.filename or args.output)) from None
    if path is None:
        return 0  # the report itself went to standard output
    if args.json:
        size = path.stat().st_size if path.is_file() else None  # /dev/null: written in place, no size
        print(json.dumps({"run_id": record.run_id, "path": str(path), "bytes": size,
                          "format": "markdown" if args.markdown else "html"}))
    else:
        print(path)
    return 0
