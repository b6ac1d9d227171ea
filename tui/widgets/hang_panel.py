"""The hang report in the Monitor: what kind of hang, where each rank waits, each rank's stack folded.

Hidden until the run's hang detector (diagnostics/failures/hang/watch.py) reports; then one title
line (at 80×24 it never hides the logs) that opens to the per-rank "where" lines, the fix, and one
folded stack per rank. The report comes as `HangReport.to_dict()`; the stack texts are read by the
caller's worker, never here.
"""
from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.containers import VerticalScroll
from textual.widgets import Collapsible, Static

from mgtutor.training.foundation.i18n import _, ngettext
from mgtutor.diagnostics.failures.kind_titles import kind_title


def where_text(report: dict[str, Any]) -> Text:
    """The summary, one line per rank (the ranks the report points at marked), the fix."""
    text = Text()
    text.append(str(report.get("summary", "")))
    odd = set(report.get("ranks") or [])
    said = report.get("where_said") or {}  # each rank's line in the language in force, when the report had it
    for rank, where in sorted((report.get("where") or {}).items(), key=lambda item: int(item[0])):
        mark = "▶ " if int(rank) in odd else "  "
        text.append(f"\n{mark}rank {rank}: ", "bold red" if int(rank) in odd else "bold")
        text.append(said.get(str(rank)) or place(where))
        if where.get("source"):
            text.append(f"\n      {where['source']}", "dim")
    for line in report.get("flight_recorder") or []:
        text.append("\n" + _("flight recorder: {line}").format(line=line), "cyan")
    if report.get("fix"):
        text.append("\n" + _("fix: "), "bold green")
        text.append(str(report["fix"]))
    for line in report.get("missing") or []:
        text.append("\n" + _("missing: {line}").format(line=line), "yellow")
    return text


def place(where: dict[str, Any]) -> str:
    if where.get("category") == "no stack":
        return _("no stack ({why})").format(why=where.get("problem") or _("unknown"))
    name = str(where.get("file") or "?").rsplit("/", 1)[-1]
    op = f"{where.get('op')} at " if where.get("op") else ""
    out = f"{where.get('category')}: {op}{name}:{where.get('line')} in {where.get('function')}"
    worker = where.get("worker")
    if worker:
        out += f"; worker {worker.get('pid')} in {str(worker.get('file')).rsplit('/', 1)[-1]}:{worker.get('line')}"
    return out


def title_of(report: dict[str, Any]) -> str:
    kind = kind_title(report.get("kind")) or _("no known cause")
    ranks = report.get("ranks") or []
    who = " — " + ngettext("rank {ranks}", "ranks {ranks}", len(ranks)).format(ranks=", ".join(map(str, ranks))) \
        if ranks else ""
    return _("hang: {kind}").format(kind=kind) + who


class HangPanel(Collapsible):
    DEFAULT_CSS = """
    HangPanel { display: none; height: auto; padding: 0; margin: 0; border-top: none; }
    HangPanel.-visible { display: block; }
    HangPanel > Contents { padding: 0 0 0 2; }
    HangPanel VerticalScroll { height: auto; max-height: 16; }
    HangPanel Collapsible { border-top: none; padding: 0; }
    """

    def __init__(self, **kwargs: object) -> None:
        super().__init__(VerticalScroll(Static("", id="hang-where"), id="hang-body"), title="hang",
                         collapsed=True, **kwargs)  # type: ignore[arg-type]
        self.report: dict[str, Any] | None = None

    def show(self, report: dict[str, Any], stacks: dict[int, str] | None = None) -> None:
        """Show a report; `stacks`: rank → its saved stack text (folded, one per rank)."""
        self.report = report
        self.title = title_of(report)
        self.query_one("#hang-where", Static).update(where_text(report))
        body = self.query_one("#hang-body", VerticalScroll)
        for old in list(body.query(".hang-stack")):
            old.remove()
        for rank, text in sorted((stacks or {}).items()):
            body.mount(Collapsible(Static(Text(text)), title=_("rank {rank} stack").format(rank=rank), collapsed=True,
                                   classes="hang-stack"))
        self.set_class(True, "-visible")

    def clear(self) -> None:
        self.report = None
        self.collapsed = True
        self.set_class(False, "-visible")
