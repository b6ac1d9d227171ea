"""`mgtutor check SCRIPT|DIR [--json]`: the classic multi-GPU mistakes in a script or a project folder,
found by reading it."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, TextIO

from mgtutor.training.foundation.i18n import N_, _, ngettext
from mgtutor.tui.errors import CliError

SEVERITY_HEADINGS = {"error": "errors", "warning": "warnings", "advice": "advice"}
HEADING_WORDS = {"error": N_("ERRORS"), "warning": N_("WARNINGS"), "advice": N_("ADVICE")}
SEVERITY_LINE = {"error": N_("error: line {line}"), "warning": N_("warning: line {line}")}


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "check", help=_("find classic multi-GPU mistakes in a training script or project folder (reads, never runs)"),
        description=_("Read SCRIPT (Python's ast; the script is never run) and report the classic multi-GPU "
                      "mistakes: no DistributedSampler, no set_epoch, every rank on GPU 0, checkpoints written by "
                      "every rank, a barrier only rank 0 reaches, deprecated APIs, per-step syncs. Each finding "
                      "names the line, why it matters, the fix and the lesson that teaches it. Calls into modules the script "
                      "imports from its own folder are followed (a helper that reads LOCAL_RANK, a replaced print).\n\n"
                      "Given a folder, every runnable script in it (a top-level .py file with a __main__ guard) and "
                      "every module they import from the folder is checked, with the findings of each file.\n\n"
                      "A finding marked 'may not apply' comes from code the checker could not follow; it is advice "
                      "whatever the rule's usual severity.\n\n"
                      "--diff shows, as a unified diff of your own lines, what --fix would write; --fix writes it. "
                      "Only safe fixes (they keep what the script does where it already runs) are made unless "
                      "--unsafe-fixes is given; every finding says which kind its fix is. A second --fix changes "
                      "nothing.\n\n"
                      "Exit status: 0 no error-level finding, 1 at least one, 2 the file cannot be read or parsed. "
                      "With --diff: 0 when nothing is left to fix by hand, 1 otherwise. With --fix: 0 when no error-level "
                      "finding is left once its fixes are written (warnings and advice left to do by hand do not "
                      "count), 1 when one is left (to fix by hand, or with --unsafe-fixes)."),
        epilog=_("examples:\n  mgtutor check train.py\n  mgtutor check train.py --json\n  mgtutor check my_project/\n"
                 "  mgtutor check train.py --brief --min-severity warning\n"
                 "  mgtutor check train.py --diff\n  mgtutor check train.py --fix --unsafe-fixes"),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("script", metavar="SCRIPT|DIR", help=_("the Python training script, or a project folder, to read"))
    parser.add_argument("--json", action="store_true",
                        help=_('print {"findings": [{rule, severity, file, line, message, fix, lesson, …}]}'))
    parser.add_argument("--brief", action="store_true", help=_("one line per finding, no explanations"))
    parser.add_argument("--min-severity", choices=["error", "warning", "advice"], default="advice",
                        help=_("hide findings below this severity (default: show all)"))
    parser.add_argument("--diff", action="store_true", help=_("show the fixes as a unified diff; change nothing"))
    parser.add_argument("--fix", action="store_true", help=_("write the fixes into the script (or the folder's files)"))
    parser.add_argument("--unsafe-fixes", action="store_true",
                        help=_("with --diff/--fix, also the fixes that may change behaviour (timeouts, downloads "
                               "behind a barrier, a removed world size)"))
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    if args.diff or args.fix:
        return fix_main(args)
    if args.unsafe_fixes:
        raise CliError(_("--unsafe-fixes goes with --diff or --fix"))
    from mgtutor.diagnostics.check.folder import check_folder, check_script
    from mgtutor.diagnostics.check.script import CheckError, has_errors

    try:
        if Path(args.script).is_dir():
            report = check_folder(args.script)
            findings, files = report.findings, report.files
        else:  # the script and the modules it imports from its own folder
            followed = check_script(args.script)
            findings, files, report = followed.findings, followed.files, None
    except CheckError as exc:
        raise CliError(str(exc)) from None
    shown = [f for f in findings if _rank(f.severity) <= _rank(args.min_severity)]
    if args.json:
        data = {"file": args.script, "findings": [f.to_json() for f in shown]}
        if report is not None:
            data |= {"files": files, "skipped": [{"file": f, "reason": why} for f, why in report.skipped]}
        if report is None and len(files) > 1:
            data["files"] = files
        print(json.dumps(data, indent=2))
    elif report is None:
        print_report(args.script, shown, brief=args.brief)
    else:
        print_folder_report(report, shown, brief=args.brief)
    return 1 if has_errors(findings) else 0


def print_folder_report(report, shown, brief: bool = False, out: TextIO | None = None) -> None:
    out = out or sys.stdout
    print(f"{printable(report.folder)}: " + _("{count} file(s) checked, {findings}").format(
        count=len(report.files), findings=counts_line(shown)), file=out)
    for name in report.files:
        group = [f for f in shown if f.file == name]
        if group or not brief:
            print("", file=out)
            print_report(name, group, brief=brief, out=out)
    for name, why in report.skipped:
        print(f"\n{printable(name)}: " + _("not checked ({why})").format(why=printable(why)), file=out)


def _rank(severity: str) -> int:
    return list(SEVERITY_HEADINGS).index(severity)


def counts_line(findings) -> str:
    parts = []
    for severity in SEVERITY_HEADINGS:
        n = sum(1 for f in findings if f.severity == severity)
        if n:
            parts.append(counted(severity, n))
    return _(", ").join(parts) or _("no findings")


def counted(severity: str, n: int) -> str:
    """"1 error", "2 warnings", "3 advice" in the language in force."""
    if severity == "error":
        return ngettext("{n} error", "{n} errors", n).format(n=n)
    if severity == "warning":
        return ngettext("{n} warning", "{n} warnings", n).format(n=n)
    return _("{n} advice").format(n=n)


def printable(text: str) -> str:
    """Script text may hold terminal control characters; show them, never send them."""
    return "".join(ch if ch.isprintable() or ch == " " else f"\\x{ord(ch):02x}" for ch in text)


def print_report(path: str, findings, brief: bool = False, out: TextIO | None = None) -> None:
    out = out or sys.stdout
    print(f"{printable(path)}: {counts_line(findings)}", file=out)
    for severity in SEVERITY_HEADINGS:
        group = [f for f in findings if f.severity == severity]
        if not group:
            continue
        if not brief:
            print(f"\n{_(HEADING_WORDS[severity])}", file=out)
        for f in group:
            unsure = " " + _("(may not apply)") if f.caveat else ""
            fixable = f"  (--fix{' --unsafe-fixes' if f.fix_safety == 'unsafe' else ''})" if f.fix_safety else ""
            print(f"  {printable(f.file)}:{f.line}  [{f.rule}]  {f.message}{unsure}{fixable}", file=out)
            if brief:
                continue
            print(f"    {f.line:>5} | {printable(f.code)}", file=out)
            print("    " + _("why:    {why}").format(why=f.why), file=out)
            if f.caveat:
                print("    " + _("may not apply: {caveat}").format(caveat=f.caveat), file=out)
            kind = {"safe": " " + _("[safe fix: check --fix]"), "unsafe": " " + _("[unsafe fix: check --fix --unsafe-fixes]")}
            print("    " + _("fix:    {fix}").format(fix=f.fix) + kind.get(f.fix_safety, " " + _("[by hand]")), file=out)
            for line in f.fix_before.splitlines():
                print(f"            - {line}", file=out)
            for line in f.fix_after.splitlines():
                print(f"            + {line}", file=out)
            print("    " + _("lesson: {lesson}").format(lesson=f.lesson), file=out)


def precheck(target: list[str], out: TextIO | None = None) -> None:
    """Before `mgtutor run` launches a script: its findings in brief, never blocking the run."""
    out = out or sys.stderr
    if not target or not target[0].endswith(".py"):
        return
    from mgtutor.diagnostics.check.script import CheckError, check_file

    try:
        findings = check_file(target[0])
    except CheckError:
        return  # the launch itself reports a missing or broken script
    except Exception as exc:  # a checker bug must never stop a run
        print("mgtutor check: " + _("skipped ({error})").format(error=type(exc).__name__), file=out)
        return
    if not findings:
        return
    print("mgtutor check: " + _("{findings} in {script} (details: {command})").format(
        findings=counts_line(findings), script=printable(target[0]), command=f"mgtutor check {printable(target[0])}"),
        file=out)
    for f in findings:
        if f.severity != "advice":
            print("  " + _(SEVERITY_LINE[f.severity]).format(line=f.line) + f" [{f.rule}] {f.message}", file=out)
    out.flush()


def fix_main(args: argparse.Namespace) -> int:
    from mgtutor.diagnostics.check.fix.apply import fix_file
    from mgtutor.diagnostics.check.folder import check_folder
    from mgtutor.diagnostics.check.project import Project
    from mgtutor.diagnostics.check.script import CheckError

    try:
        if Path(args.script).is_dir():
            folder = check_folder(args.script)
            project = Project(Path(args.script))
            reports = [fix_file(f, args.unsafe_fixes, args.fix, project) for f in folder.files]
        else:
            reports = [fix_file(args.script, args.unsafe_fixes, args.fix)]
    except CheckError as exc:
        raise CliError(str(exc)) from None
    except OSError as exc:
        raise CliError(_("cannot write the fixed script: {error}").format(error=exc.strerror or exc)) from None
    if args.json:
        print(json.dumps({"written": bool(args.fix), "files": [r.to_json() for r in reports]}, indent=2))
    else:
        for report in reports:
            print_fix_report(report, written=args.fix, unsafe=args.unsafe_fixes)
    if args.fix:  # what it could fix is written; like `check`, only an error left by hand fails
        return 1 if any(f.severity == "error" for r in reports for f in r.by_hand) else 0
    return 1 if any(r.by_hand for r in reports) else 0


# A fix's kind as `--fix` reports it (the report keeps the English value, as --json prints it)
FIX_SAFETY = {"safe": N_("safe"), "unsafe": N_("unsafe")}


def print_fix_report(report, written: bool, unsafe: bool, out: TextIO | None = None) -> None:
    out = out or sys.stdout
    name = printable(report.file)
    if report.changed and not written:
        out.write(printable_diff(report.diff()))
    if report.applied:
        verb = _("fixed {count} finding(s)") if written else _("would fix {count} finding(s)")
        print(f"{name}: " + verb.format(count=len(report.applied)) + _(": ")
              + _(", ").join(_("{rule} (line {line}, {safety})").format(rule=a.rule, line=a.line,
                                                                        safety=_(FIX_SAFETY.get(a.safety, a.safety)))
                             for a in report.applied), file=out)
        if written and report.written_to:
            print("  " + _("{script} is a link: the file it points to was rewritten, {target}").format(
                script=name, target=printable(report.written_to)), file=out)
    else:
        print(f"{name}: " + _("nothing to fix automatically"), file=out)
    hidden = [f for f in report.by_hand if f.fix_safety == "unsafe" and not unsafe]
    by_hand = [f for f in report.by_hand if f not in hidden]
    if hidden:
        print("  " + _("{count} more with --unsafe-fixes: ").format(count=len(hidden))
              + _(", ").join(f"{f.rule} (" + _("line {line}").format(line=f.line) + ")" for f in hidden), file=out)
    for f in by_hand:
        print("  " + _("by hand:") + f" {printable(f.file)}:{f.line} [{f.rule}] {f.fix}", file=out)


def printable_diff(diff: str) -> str:
    return "".join(printable(line.rstrip("\n")) + "\n" for line in diff.splitlines(keepends=True))


def patch_lines(finding: Any) -> list[str]:
    """The patch `mgtutor check --fix` would write at the user's line a CUDA failure names."""
    from mgtutor.diagnostics.check.fix.apply import device_patch

    frame = finding.script_frame
    report = device_patch(frame["file"]) if frame else None
    if report is None:
        return []
    diff = ["    " + printable(line) for line in report.diff().splitlines()]
    return ["  " + _("patch ({command} writes it):").format(command=f"mgtutor check --fix {frame['file']}"),
            *diff[:40]] if frame else []
