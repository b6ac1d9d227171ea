"""The Monitor's hang hook: the hang panel fed from the run's HangWatch alerts, and `x` for stacks now.

A mixin of MonitorScreen (monitor.py keeps only the wiring): `post_hang` runs on the watch worker's
thread and reads the saved stack files there; `show_hang` runs on the UI thread. A run reopened from
Runs after it hung and was stopped shows, opened, the hang its record keeps (`on_attach_run`, which
Textual calls after the screen's own handler): the report `mgtutor diagnose` reads.
"""
from __future__ import annotations

from typing import Any

from textual import work

from mgtutor.training.foundation.i18n import _, current_language
from mgtutor.diagnostics.failures.hang.analyse import HangReport
from mgtutor.diagnostics.failures.hang.watch import HangAlert, latest_report, take_report
from mgtutor.training.runs.records.record import RunRecord, RunStatus
from mgtutor.tui.messages import AttachRun
from mgtutor.tui.screens.from_thread import call_on_screen
from mgtutor.tui.widgets.hang_panel import HangPanel


class HangHook:
    """Needs `self.record`, `self.app`, `self.query_one` and `self.notify` (a Screen's)."""

    record: RunRecord | None

    def post_hangs(self, record: RunRecord, alerts: list[Any]) -> None:
        for alert in alerts:
            if isinstance(alert, HangAlert) and alert.report is not None:
                self.post_hang(record, alert.report)

    def on_attach_run(self, message: AttachRun) -> None:
        self.show_saved_hang(message.record)

    @work(thread=True, exclusive=True, group="monitor-saved-hang")
    def show_saved_hang(self, record: RunRecord) -> None:
        """A live run's hang watch speaks for it, and a finished run did not hang; any other ended run
        shows the newest hang saved in its stacks/, if it names one."""
        try:
            if record.status() in (RunStatus.RUNNING, RunStatus.FINISHED):
                return
            report = latest_report(record)
        except (OSError, ValueError):
            return
        if report is not None and report.finding() is not None:
            self.post_hang(record, report, opened=True)

    def post_hang(self, record: RunRecord, report: HangReport, opened: bool = False) -> None:
        """From a worker thread: the panel shows the report, each rank's saved stack folded under it."""
        stacks = {}
        for rank, path in report.stacks.items():
            try:
                with open(path, errors="replace") as handle:
                    stacks[rank] = handle.read()
            except OSError as exc:
                stacks[rank] = _("(cannot read {path}: {why})").format(path=path, why=exc.strerror)
        said = {**report.to_dict(), **report.said}
        if current_language() != "en":  # each rank's line said as the report says it (English keeps the compact form)
            said["where_said"] = {str(r): w.describe(_) for r, w in report.where.items()}
        call_on_screen(self, self.show_hang, record.run_id, said, stacks, opened)

    def show_hang(self, run_id: str, report: dict[str, Any], stacks: dict[int, str], opened: bool = False) -> None:
        if self.record is not None and self.record.run_id == run_id:
            panel = self.query_one(HangPanel)  # type: ignore[attr-defined]
            panel.show(report, stacks)
            if opened:
                panel.collapsed = False

    def clear_hang(self) -> None:
        self.query_one(HangPanel).clear()  # type: ignore[attr-defined]

    def action_stacks(self) -> None:
        if self.record is not None:
            self.notify(_("taking every rank's stack…"))  # type: ignore[attr-defined]
            self.take_stacks(self.record)

    @work(thread=True, exclusive=True, group="monitor-stacks")
    def take_stacks(self, record: RunRecord) -> None:
        report, capture = take_report(record, reason="on demand", save=True)
        self.post_hang(record, report)
        call_on_screen(self, self.notify,  # type: ignore[attr-defined]
                                  _("stacks taken in {seconds:.2f} s: {kind}").format(
                                      seconds=capture.seconds, kind=report.kind or _("no known hang")))
