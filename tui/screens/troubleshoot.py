"""Troubleshoot mode: pick a symptom, run the checks that tell its causes apart, reproduce it with a demo,
or diagnose a log / past run; findings are shown as fix cards with evidence and the lesson to read.
For symptoms whose cause is often in the code (one GPU busy, same data, no speed-up, hangs), the user's
script is read by `mgtutor check` and the findings that explain the symptom are shown beside the checks."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from rich.markup import escape
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import Header, Input, Log, OptionList, Static
from textual.widgets.option_list import Option

from mgtutor.training.foundation.i18n import N_, _
from mgtutor.diagnostics.check.script import CheckError, CheckFinding, check_file, findings_for_symptom
from mgtutor.diagnostics.failures.demos import SCENARIOS, run_demo
from mgtutor.diagnostics.failures.classify import Finding, diagnose_files
from mgtutor.diagnostics.failures.hang.watch import diagnose_with_hangs
from mgtutor.diagnostics.failures.kind_titles import kind_title
from mgtutor.diagnostics.failures.logs.logparse import clean
from mgtutor.diagnostics.failures.symptoms import SYMPTOMS, Check, Symptom, run_checks
from mgtutor.training.runs.records.record import RunRecord, find_run, list_runs
from mgtutor.tui.messages import RunStarted
from mgtutor.tui.screens.from_thread import call_on_screen
from mgtutor.tui.screens.patch import OffersPatch
from mgtutor.tui.screens.troubleshoot_oom import OOM_HINT, OOM_SYMPTOM, OomActions
from mgtutor.tui.widgets.mode_footer import ModeFooter
from mgtutor.tui.widgets.script_findings import ScriptFindings

LOG_OPTION = "log"
_MARK = {True: "[green]✓[/]", False: "[red]✗[/]", None: "[dim]·[/]"}


def card_markup(index: int, finding: Finding) -> str:
    who = _("all ranks / rank unknown") if finding.rank is None else f"rank {finding.rank}"
    detail = f" ({escape(finding.detail)})" if finding.detail else ""
    fix, lesson, press_l = _("Fix:"), _("Lesson:"), _("(press l for Lessons)")
    lines = [f"[b]{index}. {escape(kind_title(finding.kind))}[/b]{detail} — {who}", escape(finding.summary),
             f"[b]{fix}[/b] {escape(finding.fix)}"]
    lines += [f"[dim]{escape(ev['file'])}:{ev['line']}[/dim] {escape(clean(str(ev['text']))[:200])}" for ev in finding.evidence]
    lines.append(f"[b]{lesson}[/b] {finding.lesson}  {press_l}")
    return "\n".join(lines)


def checks_markup(checks: list[Check]) -> str:
    return "\n".join(f"{_MARK[c.ok]} [b]{escape(c.name)}[/b]: {escape(c.text)}" for c in checks)


def last_run_script(scan: int = 20) -> Path | None:
    """The newest run's training script, when it was a .py file that still exists."""
    for record in list_runs():
        scan -= 1
        if scan < 0:
            return None
        try:
            meta = record.meta()
            target = meta.target
            if target and str(target[0]).endswith(".py"):
                path = Path(meta.cwd or ".") / target[0]
                return path if path.is_file() else None
        except (OSError, ValueError, TypeError, AttributeError):
            continue
    return None


class TroubleshootScreen(OomActions, OffersPatch, Screen):
    TITLE = N_("Troubleshoot")
    BINDINGS = [
        Binding("c", "checks", N_("Checks"), tooltip=N_("run the checks that tell this symptom's causes apart")),
        Binding("x", "demo", N_("Demo"), tooltip=N_("reproduce the symptom for real with a demo")),
        Binding("v", "next_demo", N_("Other"), tooltip=N_("another demo of this symptom")),
        Binding("g", "latest", N_("Last run"), tooltip=N_("diagnose the newest run")),
        Binding("o", "open_input", N_("Log/run"), tooltip=N_("diagnose a log file or a run id")),
        Binding("s", "open_script", N_("Script"), tooltip=N_("read your training script for the mistakes behind this symptom")),
        Binding("F", "show_patch", N_("Fixes"), key_display="F", show=False,
                tooltip=N_("the fixes mgtutor check --fix would write into your script, as a diff (a: apply)")),
        Binding("b", "find_batch", N_("Batch"), show=False, tooltip=N_("out of memory: find the largest batch that fits")),
        Binding("w", "memory_rerun", N_("--memory"), show=False,
                tooltip=N_("out of memory: run the newest run's script again with --memory")),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.symptom: Symptom | None = None
        self.demo_index = 0
        self.findings: list[Finding] = []
        self.script: Path | None = None
        self.script_findings: list[CheckFinding] = []
        self.busy = False

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal(classes="mode-body"):
            options = [Option(_(s.title), id=s.key) for s in SYMPTOMS]
            options.append(Option(_("Diagnose a log / a past run"), id=LOG_OPTION))
            yield OptionList(*options, id="ts-symptoms")
            with VerticalScroll(id="ts-body"):
                yield Static(_("Pick a symptom on the left (Enter)."), id="ts-about")
                yield Static("", id="ts-checks")
                yield Input(placeholder=_("your training script (path) — Enter reads it for the mistakes behind "
                                          "this symptom"), id="ts-script")
                yield ScriptFindings(id="ts-script-findings")
                yield Static("", id="ts-status")
                yield Input(placeholder=_("run id or log file(s) — Enter diagnoses"), id="ts-input")
                yield Log(max_lines=400, id="ts-log", classes="ts-log")
                yield Vertical(id="ts-findings")
        yield ModeFooter()

    def on_mount(self) -> None:
        self.query_one("#ts-log", Log).display = False  # an empty box until a demo runs
        self.query_one("#ts-symptoms", OptionList).focus()
        self.suggest_script()

    @work(thread=True, exclusive=True, group="ts-suggest")
    def suggest_script(self) -> None:
        """Offer the script of the newest run (Enter in the script field accepts it): usually the one that misbehaves."""
        path = last_run_script()
        if path is not None:
            call_on_screen(self, self._offer_script, path)

    def _offer_script(self, path: Path) -> None:
        field = self.query_one("#ts-script", Input)
        if not field.value:
            field.value = str(path)

    @on(OptionList.OptionSelected, "#ts-symptoms")
    def pick(self, event: OptionList.OptionSelected) -> None:
        if event.option.id == LOG_OPTION:
            self.symptom = None
            self.query_one("#ts-about", Static).update(
                _("[b]Diagnose a log or a past run[/b]\nType a run id (see Runs) or log file paths below, or press g "
                  "for the newest run."))
            self.query_one("#ts-checks", Static).update("")
            self.query_one("#ts-script-findings", ScriptFindings).clear()
            self.action_open_input()
            return
        self.symptom = next(s for s in SYMPTOMS if s.key == event.option.id)
        self.demo_index = 0
        self.query_one("#ts-about", Static).update(
            f"[b]{escape(_(self.symptom.title))}[/b]\n" + _("Usual causes: {causes}.").format(
                causes=escape(_(self.symptom.causes))))
        self._show_demo_hint()
        self.action_checks()
        self.refresh_script_findings()

    def _show_demo_hint(self) -> None:
        if self.symptom is None:
            return
        demo = SCENARIOS[self.symptom.demos[self.demo_index % len(self.symptom.demos)]]
        others = " " + _("(v: another)") if len(self.symptom.demos) > 1 else ""
        oom = "\n" + _(OOM_HINT) if self.symptom.key == OOM_SYMPTOM else ""
        self.set_status(_("x: reproduce it for real — demo [b]{name}[/b]: {what}").format(
            name=demo.name, what=escape(_(demo.what_happens))) + others + oom)

    def set_status(self, text: str) -> None:
        self.query_one("#ts-status", Static).update(text)

    # checks
    def action_checks(self) -> None:
        if self.symptom is not None:
            self.query_one("#ts-checks", Static).update("[dim]" + _("checking...") + "[/dim]")
            self.run_symptom_checks(self.symptom)

    @work(thread=True, exclusive=True, group="ts-checks")
    def run_symptom_checks(self, symptom: Symptom) -> None:
        checks = run_checks(symptom)
        text = checks_markup(checks) or _("[dim]No machine check tells this one apart: the cause is in the script.[/dim]")
        call_on_screen(self, lambda: self.query_one("#ts-checks", Static).update(text))

    # the user's script, read by mgtutor check
    def action_open_script(self) -> None:
        self.query_one("#ts-script", Input).focus()

    @on(Input.Submitted, "#ts-script")
    def script_given(self, event: Input.Submitted) -> None:
        path = event.value.strip()
        self.script = Path(path).expanduser() if path else None
        self.refresh_script_findings()

    def refresh_script_findings(self) -> None:
        box = self.query_one("#ts-script-findings", ScriptFindings)
        wanted = self.symptom.script_symptom if self.symptom else None
        if wanted is None:
            applies = _(", ").join(_(s.title).lower() for s in SYMPTOMS if s.script_symptom)
            box.show("[dim]" + _("Script checks explain: {symptoms}.").format(symptoms=escape(applies)) + "[/dim]") \
                if self.script else box.clear()
            self.script_findings = []
        elif self.script is None:
            box.show("[dim]" + _("s: give your training script, and its mistakes behind this symptom are shown here.")
                     + "[/dim]")
            self.script_findings = []
        else:
            box.show("[dim]" + _("reading {path}...").format(path=escape(str(self.script))) + "[/dim]")
            self.check_script_worker(self.script, wanted)

    @work(thread=True, exclusive=True, group="ts-script")
    def check_script_worker(self, script: Path, wanted: str) -> None:
        try:
            found = check_file(script)
        except CheckError as exc:
            call_on_screen(self, self._script_checked, wanted,
                                      "[red]" + _("cannot check the script: {why}").format(why=escape(str(exc))) + "[/]", [])
            return
        relevant = findings_for_symptom(found, wanted)
        name = escape(script.name)
        if relevant:
            heading = _("[b]In {name}:[/b] {count} finding(s) that explain this symptom").format(name=name,
                                                                                                  count=len(relevant))
        else:
            heading = "[green]✓[/] " + _("nothing in {name} explains this symptom").format(name=name)
        others = len(found) - len(relevant)
        if others:
            heading += " [dim]" + _("({count} other finding(s): {command})").format(
                count=others, command=f"mgtutor check {escape(str(script))}") + "[/dim]"
        call_on_screen(self, self._script_checked, wanted, heading, relevant)

    def _script_checked(self, wanted: str, heading: str, findings: list[CheckFinding]) -> None:
        if self.symptom is None or self.symptom.script_symptom != wanted:
            return  # the user moved on to another symptom while the script was read
        self.script_findings = findings
        if any(f.fix_safety == "safe" for f in findings):
            heading += " [dim]" + _("(F: the fixes as a diff)") + "[/dim]"
        self.query_one("#ts-script-findings", ScriptFindings).show(heading, findings)

    def action_show_patch(self) -> None:
        """The script read with s, else the one a diagnosis names (a CUDA line of the user's)."""
        framed = next((f.script_frame["file"] for f in self.findings if f.script_frame), None)
        script = self.script or (Path(framed) if framed else None)
        if script is None:
            self.notify(_("s: give your training script first"))
        else:
            self.show_patch_of(script)

    def patch_written(self) -> None:
        self.refresh_script_findings()

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
        self.query_one("#ts-log", Log).display = True  # shown once there is something to show
        self.show_findings([])
        self.set_status(_("demo [b]{name}[/b] running: real ranks, real failure...").format(name=name))
        self.run_demo_worker(name)

    @work(thread=True, exclusive=True, group="ts-demo")
    def run_demo_worker(self, name: str) -> None:
        pending: list[str] = []
        last = time.monotonic()

        def on_line(rank: int | None, _stream: str, line: str) -> None:
            nonlocal last
            pending.append(f"{'[torchrun]' if rank is None else f'[rank {rank}]'} {clean(line)}")
            if time.monotonic() - last > 0.2:
                call_on_screen(self, self._write_lines, pending[:])
                pending.clear()
                last = time.monotonic()

        def on_start(run: Any) -> None:
            self.post_message(RunStarted(run))

        try:
            outcome = run_demo(name, on_line=on_line, on_start=on_start)
        except Exception as exc:  # a launch that cannot start says why on screen
            call_on_screen(self, self._demo_done, "[red]" + _("demo {name} could not start: {why}").format(
                name=name, why=escape(str(exc))) + "[/]", [])
            return
        call_on_screen(self, self._write_lines, pending[:])
        verdict = _("diagnosed") if outcome.diagnosed else _("NOT diagnosed as expected")
        call_on_screen(self, self._demo_done, _("demo [b]{name}[/b] finished ({verdict}); run {run_id}").format(
            name=name, verdict=verdict, run_id=outcome.run.record.run_id), outcome.findings)

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
                    raise ValueError(_("no runs yet"))
                findings, source = diagnose_with_hangs(record), record.run_id
            elif len(words) == 1 and (record := find_run(words[0])) is not None:
                findings, source = diagnose_with_hangs(record), record.run_id
            else:
                findings, source = diagnose_files(words), ", ".join(words)
        except (OSError, ValueError) as exc:
            call_on_screen(self, self.set_status, "[red]" + _("cannot diagnose: {why}").format(
                why=escape(str(exc))) + "[/]")
            return
        found = _("{count} finding(s) below").format(count=len(findings)) if findings else _("no sign of a failure")
        call_on_screen(self, self.set_status, _("diagnosis of {source}: {found}").format(source=escape(source),
                                                                                             found=found))
        call_on_screen(self, self.show_findings, findings)

    def show_findings(self, findings: list[Finding]) -> None:
        self.findings = findings
        box = self.query_one("#ts-findings", Vertical)
        box.remove_children()
        if findings:
            cards = [Static(card_markup(i, f), classes="fix-card") for i, f in enumerate(findings, 1)]
            if any(f.script_frame for f in findings):
                cards.append(Static("[dim]" + _("F: the patch mgtutor check --fix would write into your script")
                                    + "[/dim]"))
            box.mount_all(cards)
        # the answer goes where the user looks: at 80×24 it is drawn below the fold otherwise
        self.call_after_refresh(self._reveal, bool(findings))

    def _reveal(self, found: bool) -> None:
        """The status line at the top, the first card under it; with findings the pane takes the keys
        (↓, PgDn, End scroll it), so the rest of a long card is one key away."""
        body = self.query_one("#ts-body", VerticalScroll)
        body.scroll_to_widget(self.query_one("#ts-status"), top=True, animate=False)
        if found:
            body.focus(scroll_visible=False)


__all__ = ["TroubleshootScreen", "RunRecord"]
