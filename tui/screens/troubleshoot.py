"""Troubleshoot mode: pick a symptom, run the checks that tell its causes apart, reproduce it with a demo,
or diagnose a log / past run; findings are shown as fix cards with evidence and the lesson to read."""
from __future__ import annotations

import time
from typing import Any

from rich.markup import escape
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Header, Input, Log, OptionList, Static
from textual.widgets.option_list import Option

from mgtutor.diagnostics.demos import SCENARIOS, run_demo
from mgtutor.diagnostics.failures import Finding, diagnose_files, diagnose_run
from mgtutor.diagnostics.logparse import clean
from mgtutor.diagnostics.symptoms import SYMPTOMS, Check, Symptom, run_checks
from mgtutor.training.records import RunRecord, find_run, list_runs

LOG_OPTION = "log"
_MARK = {True: "[green]✓[/]", False: "[red]✗[/]", None: "[dim]·[/]"}


def card_markup(index: int, finding: Finding) -> str:
    who = "all ranks / rank unknown" if finding.rank is None else f"rank {finding.rank}"
    detail = f" ({escape(finding.detail)})" if finding.detail else ""
    lines = [f"[b]{index}. {finding.kind}[/b]{detail} — {who}", escape(finding.summary),
             f"[b]Fix:[/b] {escape(finding.fix)}"]
    lines += [f"[dim]{escape(ev['file'])}:{ev['line']}[/dim] {escape(clean(str(ev['text']))[:200])}" for ev in finding.evidence]
    lines.append(f"[b]Lesson:[/b] {finding.lesson}  (press l for Lessons)")
    return "\n".join(lines)


def checks_markup(checks: list[Check]) -> str:
    return "\n".join(f"{_MARK[c.ok]} [b]{escape(c.name)}[/b]: {escape(c.text)}" for c in checks)


class TroubleshootScreen(Screen):
    TITLE = "Troubleshoot"
    BINDINGS = [
        Binding("c", "checks", "Run checks"),
        Binding("x", "demo", "Run demo"),
        Binding("v", "next_demo", "Other demo"),
        Binding("g", "latest", "Diagnose last run"),
        Binding("o", "open_input", "Log/run…"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.symptom: Symptom | None = None
        self.demo_index = 0
        self.findings: list[Finding] = []
        self.busy = False

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal(classes="mode-body"):
            options = [Option(s.title, id=s.key) for s in SYMPTOMS]
            options.append(Option("Diagnose a log / a past run", id=LOG_OPTION))
            yield OptionList(*options, id="ts-symptoms")
            with VerticalScroll(id="ts-body"):
                yield Static("Pick a symptom on the left (Enter).", id="ts-about")
                yield Static("", id="ts-checks")
                yield Static("", id="ts-status")
                yield Input(placeholder="run id or log file(s) — Enter diagnoses", id="ts-input")
                yield Log(max_lines=400, id="ts-log", classes="ts-log")
                yield Vertical(id="ts-findings")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#ts-symptoms", OptionList).focus()

    @on(OptionList.OptionSelected, "#ts-symptoms")
    def pick(self, event: OptionList.OptionSelected) -> None:
        if event.option.id == LOG_OPTION:
            self.symptom = None
            self.query_one("#ts-about", Static).update(
                "[b]Diagnose a log or a past run[/b]\nType a run id (see Runs) or log file paths below, or press g "
                "for the newest run.")
            self.query_one("#ts-checks", Static).update("")
            self.action_open_input()
            return
        self.symptom = next(s for s in SYMPTOMS if s.key == event.option.id)
        self.demo_index = 0
        self.query_one("#ts-about", Static).update(
            f"[b]{escape(self.symptom.title)}[/b]\nUsual causes: {escape(self.symptom.causes)}.")
        self._show_demo_hint()
        self.action_checks()

    def _show_demo_hint(self) -> None:
        if self.symptom is None:
            return
        demo = SCENARIOS[self.symptom.demos[self.demo_index % len(self.symptom.demos)]]
        others = " (v: another)" if len(self.symptom.demos) > 1 else ""
        self.set_status(f"x: reproduce it for real — demo [b]{demo.name}[/b]: {escape(demo.what_happens)}{others}")

    def set_status(self, text: str) -> None:
        self.query_one("#ts-status", Static).update(text)

    # checks
    def action_checks(self) -> None:
        if self.symptom is not None:
            self.query_one("#ts-checks", Static).update("[dim]checking…[/dim]")
            self.run_symptom_checks(self.symptom)

    @work(thread=True, exclusive=True, group="ts-checks")
    def run_symptom_checks(self, symptom: Symptom) -> None:
        checks = run_checks(symptom)
        self.app.call_from_thread(self.query_one("#ts-checks", Static).update, checks_markup(checks))

    # demos
    def action_next_demo(self) -> None:
        if self.symptom is not None:
            self.demo_index += 1
            self._show_demo_hint()

    def action_demo(self) -> None:
        if self.symptom is None or self.busy:
            return
        name = self.symptom.demos[self.demo_index % len(self.symptom.demos)]
        self.busy = True
        self.query_one("#ts-log", Log).clear()
        self.show_findings([])
        self.set_status(f"demo [b]{name}[/b] running: real ranks, real failure…")
        self.run_demo_worker(name)

    @work(thread=True, exclusive=True, group="ts-demo")
    def run_demo_worker(self, name: str) -> None:
        pending: list[str] = []
        last = time.monotonic()

        def on_line(rank: int | None, _stream: str, line: str) -> None:
            nonlocal last
            pending.append(f"{'[torchrun]' if rank is None else f'[rank {rank}]'} {clean(line)}")
            if time.monotonic() - last > 0.2:
                self.app.call_from_thread(self._write_lines, pending[:])
                pending.clear()
                last = time.monotonic()

        def on_start(run: Any) -> None:
            tracker = getattr(self.app, "track_run", None)
            if tracker:
                self.app.call_from_thread(tracker, run)

        try:
            outcome = run_demo(name, on_line=on_line, on_start=on_start)
        except Exception as exc:  # a launch that cannot start says why on screen
            self.app.call_from_thread(self._demo_done, f"[red]demo {name} could not start: {escape(str(exc))}[/]", [])
            return
        self.app.call_from_thread(self._write_lines, pending[:])
        verdict = "diagnosed" if outcome.diagnosed else "NOT diagnosed as expected"
        self.app.call_from_thread(self._demo_done, f"demo [b]{name}[/b] finished ({verdict}); run "
                                  f"{outcome.run.record.run_id}", outcome.findings)

    def _write_lines(self, lines: list[str]) -> None:
        if lines:
            self.query_one("#ts-log", Log).write_lines(lines)

    def _demo_done(self, status: str, findings: list[Finding]) -> None:
        self.busy = False
        self.set_status(status)
        self.show_findings(findings)

    # a log or a past run
    def action_open_input(self) -> None:
        self.query_one("#ts-input", Input).focus()

    @on(Input.Submitted, "#ts-input")
    def diagnose_input(self, event: Input.Submitted) -> None:
        words = event.value.split()
        if words:
            self.diagnose_worker(words)

    def action_latest(self) -> None:
        self.diagnose_worker([])

    @work(thread=True, exclusive=True, group="ts-diagnose")
    def diagnose_worker(self, words: list[str]) -> None:
        try:
            if not words:
                record = next(iter(list_runs()), None)
                if record is None:
                    raise ValueError("no runs yet")
                findings, source = diagnose_run(record), record.run_id
            elif len(words) == 1 and (record := find_run(words[0])) is not None:
                findings, source = diagnose_run(record), record.run_id
            else:
                findings, source = diagnose_files(words), ", ".join(words)
        except (OSError, ValueError) as exc:
            self.app.call_from_thread(self.set_status, f"[red]cannot diagnose: {escape(str(exc))}[/]")
            return
        self.app.call_from_thread(self.set_status, f"diagnosis of {escape(source)}: {len(findings)} finding(s)")
        self.app.call_from_thread(self.show_findings, findings)

    def show_findings(self, findings: list[Finding]) -> None:
        self.findings = findings
        box = self.query_one("#ts-findings", Vertical)
        box.remove_children()
        if not findings:
            return
        box.mount_all(Static(card_markup(i, f), classes="fix-card") for i, f in enumerate(findings, 1))


__all__ = ["TroubleshootScreen", "RunRecord"]
