"""`mgtutor check DIR`: a project folder — its runnable scripts and every module they import from
it — checked file by file, each file's rules following calls across the project."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from mgtutor.training.foundation.i18n import _
from mgtutor.diagnostics.check.project import MAX_FILES, Project, entry_scripts
from mgtutor.diagnostics.check.script import CheckError, CheckFinding, check_file


@dataclass
class FolderReport:
    folder: str
    files: list[str] = field(default_factory=list)               # checked, in order: scripts first
    findings: list[CheckFinding] = field(default_factory=list)   # each names its file
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (file, why) for modules not readable

    def by_file(self) -> dict[str, list[CheckFinding]]:
        grouped: dict[str, list[CheckFinding]] = {name: [] for name in self.files}
        for finding in self.findings:
            grouped.setdefault(finding.file, []).append(finding)
        return grouped


def check_folder(folder: str | Path) -> FolderReport:
    """Raises CheckError when the folder is missing, holds no Python script, or none can be read; a
    file that cannot be read is listed in `skipped` and the others are checked."""
    given = Path(folder)
    if not given.is_dir():
        raise CheckError((_("no such folder: {path}") if not given.exists() else _("{path} is not a folder"))
                         .format(path=given))
    scripts = entry_scripts(given)
    if not scripts:
        raise CheckError(_("{path}: no Python script in this folder (mgtutor check reads *.py files)").format(path=given))
    project = Project(given)
    report = FolderReport(folder=str(given))
    _check_each(project, given, project.closure(scripts, given)[:MAX_FILES], report)
    if not report.files:
        raise CheckError(_("{path}: no file could be checked ({why})").format(path=given, why=report.skipped[0][1]))
    return report


def _shown(given: Path, path: Path) -> Path:
    """The file as the user would spell it: under the folder they named, not resolved."""
    try:
        return given / path.relative_to(given.resolve())
    except ValueError:
        return path


def check_script(script: str | Path) -> FolderReport:
    """`mgtutor check SCRIPT`: the script, then every module it imports from its own folder (transitively),
    each checked with its own rules, the way `check DIR` checks them. The script's own errors raise
    CheckError; a helper that cannot be read is listed in `skipped`."""
    path = Path(script)
    project = Project(path.parent)
    report = FolderReport(folder=str(path.parent))
    report.findings.extend(check_file(path, project))
    report.files.append(str(path))
    if path.is_file():
        _check_each(project, path.parent, project.closure([path], path.parent)[1:MAX_FILES], report)
    return report


def _check_each(project: Project, given: Path, paths: list[Path], report: FolderReport) -> None:
    """Each file checked with its own rules into `report`; one that cannot be read is listed as skipped."""
    for path in paths:
        shown = _shown(given, path)
        try:
            findings = check_file(shown, project)
        except CheckError as exc:
            report.skipped.append((str(shown), str(exc)))
            continue
        report.files.append(str(shown))
        report.findings.extend(findings)
