"""`mgtutor check`'s findings on the user's script, folded beside the run (k opens it).

The check reads the script (never runs it) in a worker while the run starts; the panel stays one
line high until opened, so it never hides the logs at 80×24.
"""
from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.containers import VerticalScroll
from textual.widgets import Collapsible, Static

from mgtutor.training.foundation.i18n import N_, _, ljust_cells, ngettext

SEVERITY_STYLE = {"error": "bold red", "warning": "bold yellow", "advice": "bold cyan"}
SEVERITY_WORDS = {"error": N_("error"), "warning": N_("warning"), "advice": N_("advice")}
SAFETY_NOTES = {"safe": N_("[safe fix: F shows it]"), "unsafe": N_("[unsafe fix: F shows it]")}


def counted(severity: str, n: int) -> str:
    """'2 errors', '1 warning', '3 advice' in the language in force."""
    if severity == "error":
        return ngettext("{n} error", "{n} errors", n).format(n=n)
    if severity == "warning":
        return ngettext("{n} warning", "{n} warnings", n).format(n=n)
    if severity == "advice":
        return _("{n} advice").format(n=n)
    return f"{n} {severity}{'s' if n > 1 else ''}"


def summary(findings: list[dict[str, Any]]) -> str:
    counts: dict[str, int] = {}
    for finding in findings:
        counts[finding["severity"]] = counts.get(finding["severity"], 0) + 1
    parts = [counted(sev, n) for sev, n in counts.items()]
    return _(", ").join(parts) if parts else _("no finding")


def findings_text(findings: list[dict[str, Any]]) -> Text:
    """One block per finding: severity, rule, file:line, what it found, then the fix."""
    text = Text()
    for index, finding in enumerate(findings):
        if index:
            text.append("\n")
        severity = finding.get("severity", "")
        word = _(SEVERITY_WORDS.get(severity, severity))
        text.append(ljust_cells(word, 8), SEVERITY_STYLE.get(severity, "bold"))
        text.append(f"[{finding.get('rule')}] ", "bold")
        text.append(f"{finding.get('file')}:{finding.get('line')}", "underline")
        text.append(f"  {finding.get('message', '')}")
        if finding.get("fix"):
            text.append("\n        " + _("fix: "), "bold green")
            text.append(str(finding["fix"]))
        if finding.get("lesson"):
            text.append("  " + _("(lesson {lesson})").format(lesson=finding["lesson"]), "dim")
        if finding.get("fix_safety"):
            safety = finding["fix_safety"]
            note = SAFETY_NOTES.get(safety)
            text.append("  " + (_(note) if note else f"[{safety} fix: F shows it]"), "dim")
    return text


class CheckPanel(Collapsible):
    """Hidden until a script was checked; then a folded title that says how many findings."""

    DEFAULT_CSS = """
    CheckPanel { display: none; height: auto; padding: 0; margin: 0; border-top: none; }
    CheckPanel.-visible { display: block; }
    CheckPanel VerticalScroll { height: auto; max-height: 10; }
    CheckPanel Contents { padding: 0 0 0 2; }
    """

    def __init__(self, **kwargs: object) -> None:
        super().__init__(VerticalScroll(Static("", id="check-findings")), title="check", collapsed=True,
                         **kwargs)  # type: ignore[arg-type]
        self.findings: list[dict[str, Any]] = []
        self.error: str | None = None
        self.script = ""
        self.plain = ""

    @property
    def fixable(self) -> int:
        """Findings `check --fix` rewrites safely: the F key shows them as a diff."""
        return sum(1 for f in self.findings if f.get("fix_safety") == "safe")

    def _body(self) -> Static:
        return self.query_one("#check-findings", Static)

    def reset(self) -> None:
        self.findings, self.error, self.script, self.plain = [], None, "", ""
        self.collapsed = True
        self.set_class(False, "-visible")

    def checking(self, script: str) -> None:
        self.reset()
        self.script = script
        self.title = _("check {script}: reading...").format(script=script)
        self.set_class(True, "-visible")

    def show(self, script: str, findings: list[dict[str, Any]], error: str | None = None) -> None:
        self.findings, self.error, self.script = findings, error, script
        name = script.rsplit("/", 1)[-1]
        if error:
            self.title = _("check {script}: could not check it (k)").format(script=name)
            body = Text(error, "yellow")
        else:
            self.title = _("check {script}: {found}").format(script=name, found=summary(findings)) + \
                (" " + _("(k: show)") if findings else "")
            body = findings_text(findings) if findings else Text(_("nothing found"), "green")
        self.plain = f"{self.title}\n{body.plain}"
        self._body().update(body)
        self.set_class(True, "-visible")
