"""The `mgtutor check` findings that explain a Troubleshoot symptom, as cards: rule, file:line, the code line,
the fix and the lesson. The script's text is shown, never interpreted (markup escaped, control characters gone)."""
from __future__ import annotations

from collections.abc import Sequence

from rich.markup import escape
from textual.containers import Vertical
from textual.widgets import Static

from mgtutor.training.foundation.i18n import N_, _
from mgtutor.diagnostics.check.script import CheckFinding
from mgtutor.diagnostics.failures.logs.logparse import clean

_SEVERITY_STYLE = {"error": "red", "warning": "yellow", "advice": "cyan"}
SEVERITY_WORDS = {"error": N_("error"), "warning": N_("warning"), "advice": N_("advice")}


def script_card_markup(finding: CheckFinding) -> str:
    style = _SEVERITY_STYLE.get(finding.severity, "b")
    fix, like_this, lesson, press_l = _("Fix:"), _("like this:"), _("Lesson:"), _("(press l for Lessons)")
    severity = _(SEVERITY_WORDS.get(finding.severity, finding.severity))
    lines = [f"[{style}]{severity}[/] [b]{escape(finding.rule)}[/b] — "
             f"{escape(clean(finding.file))}:{finding.line}",
             f"[dim]{finding.line:>5} |[/dim] {escape(clean(finding.code)[:160])}",
             escape(finding.message)]
    if finding.why:
        lines.append(f"[dim]{escape(finding.why)}[/dim]")
    lines.append(f"[b]{fix}[/b] {escape(finding.fix)}")
    if finding.fix_after:
        lines.append(f"[dim]{like_this}[/dim] " + escape(" ⏎ ".join(finding.fix_after.splitlines())))
    lines.append(f"[b]{lesson}[/b] {escape(finding.lesson)}  {press_l}")
    return "\n".join(lines)


class ScriptFindings(Vertical):
    """A heading line, then one card per finding (or a line saying why there is none)."""

    DEFAULT_CSS = """
    ScriptFindings { height: auto; }
    ScriptFindings > .script-heading { height: auto; margin-top: 1; }
    """

    def show(self, heading: str, findings: Sequence[CheckFinding] = ()) -> None:
        self.remove_children()
        self.mount(Static(heading, classes="script-heading"))
        self.mount_all(Static(script_card_markup(f), classes="fix-card script-card") for f in findings)

    def clear(self) -> None:
        self.remove_children()
