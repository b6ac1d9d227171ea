"""`mgtutor diagnose [RUN_ID | LOGFILE…] [--json]`: the cause of a failed run, and the fix."""
from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from mgtutor.diagnostics.failures.classify import Finding, diagnose_files
from mgtutor.diagnostics.failures.hang.watch import diagnose_with_hangs
from mgtutor.diagnostics.failures.kind_titles import kind_title
from mgtutor.training.runs.records.record import RunRecord, find_run_why, list_runs, runs_root, runs_root_problem
from mgtutor.training.foundation.safe_io import path_kind
from mgtutor.tui.commands.check import patch_lines
from mgtutor.training.foundation.i18n import N_, _
from mgtutor.tui.commands.options import command_parser
from mgtutor.tui.errors import CliError


HELP = N_("find why a run failed or hung: cause, evidence, fix, lesson")
DESCRIPTION = N_("Read a run record (every rank's stdout and stderr, torchrun's output, exit codes, events) or any "
                 "log files, and print the findings, most likely root cause first. Exit code 0 also when failures "
                 "are found (it is a report); 2 when the input cannot be read.")
EPILOG = N_("examples:\n  mgtutor diagnose                       the newest run\n"
            "  mgtutor diagnose 20261130-1200         a run by id (or a unique part of it)\n"
            "  mgtutor diagnose slurm-1234.out        any log file, ranks interleaved or not\n"
            "  mgtutor diagnose rank0.log rank1.log --json")


def register(sub: argparse._SubParsersAction) -> None:
    parser = command_parser(sub, "diagnose", HELP, DESCRIPTION, EPILOG)
    parser.add_argument("inputs", nargs="*", metavar="RUN_ID | LOGFILE", help=_("a run id or path, or log files"))
    parser.add_argument("--json", action="store_true", help=_('print {"findings": [...]} for scripts'))
    parser.set_defaults(func=main)


def _readable_run(record: RunRecord) -> RunRecord:
    """The record, or ValueError when its folder cannot be read at all (mode 000, another user's)."""
    try:
        os.listdir(record.path)
    except OSError as exc:
        raise ValueError(_("cannot read run {id}: {why} ({path})").format(id=record.run_id, why=exc.strerror or exc,
                                                                           path=record.path)) from None
    return record


def resolve(inputs: list[str]) -> tuple[str, RunRecord | list[str]]:
    """('run', record) or ('files', paths); ValueError with one line when nothing readable matches."""
    if not inputs:
        newest = next(iter(list_runs()), None)
        if newest is None and runs_root_problem():
            raise ValueError(_("{problem}: no run can be diagnosed; give log files").format(problem=runs_root_problem()))
        if newest is None:
            raise ValueError(_("no runs yet in {folder}; give a run id or log files").format(folder=runs_root()))
        return "run", _readable_run(newest)
    if len(inputs) == 1:
        path = Path(inputs[0])
        if path.is_dir() or not path.exists():
            record, why = find_run_why(inputs[0])
            if record is not None:
                return "run", _readable_run(record)
            if not path.exists():
                raise ValueError(_("{name!r} is neither a readable file nor a run id: {why}").format(
                    name=inputs[0], why=runs_root_problem() or why))
    for name in inputs:
        kind = path_kind(name)
        if kind is not None:
            why = (_("no such file") if kind == "missing" else
                   _("it is {kind}, not a log file").format(kind=_(kind)) if kind.startswith("a ") else _(kind))
            raise ValueError(_("cannot read {name}: {why}").format(name=name, why=why))
    return "files", inputs


def format_finding(index: int, finding: Finding) -> str:
    who = f"rank {finding.rank}" if finding.rank is not None else _("all ranks / unknown rank")
    detail = f" ({finding.detail})" if finding.detail else ""
    lines = [f"{index}. {kind_title(finding.kind)}{detail} — {who}", f"   {finding.summary}",
             "   " + _("fix: {fix}").format(fix=finding.fix)]
    for ev in finding.evidence:
        lines.append("   " + _("evidence {file}:{line}: {text}").format(file=ev["file"], line=ev["line"], text=ev["text"]))
    lines += [" " + line for line in patch_lines(finding)]
    lines.append("   " + _("lesson: {lesson}  (mgtutor lessons show {lesson})").format(lesson=finding.lesson))
    return "\n".join(lines)


def main(args: argparse.Namespace) -> int:
    try:
        what, target = resolve(args.inputs)
        findings = diagnose_with_hangs(target) if what == "run" else diagnose_files(target)  # type: ignore[arg-type]
    except (ValueError, OSError) as exc:
        raise CliError(str(exc)) from None
    source = str(target.path) if what == "run" else ", ".join(target)  # type: ignore[union-attr,arg-type]
    if args.json:
        print(json.dumps({"source": source, "findings": [f.to_dict() for f in findings]}, indent=2))
        return 0
    if not findings:
        print(_("No known failure found in {source}.").format(source=source))
        return 0
    print(_("Diagnosis of {source} — {count} finding(s), most likely cause first:").format(
        source=source, count=len(findings)) + "\n")
    print("\n\n".join(format_finding(i, f) for i, f in enumerate(findings, 1)))
    return 0
