"""The Monitor's hang hook: the hang panel fed from the run's HangWatch alerts, and `x` for stacks now.

A mixin of MonitorScreen (monitor.py keeps only the wiring): `post_hang` runs on the watch worker's
thread and reads the saved stack files there; `show_hang` runs on the UI thread.
"""
from __future__ import annotations

from typing import Any

from textual import work

from mgtutor.training.foundation.i18n import _, current_language
from mgtutor.diagnostics.failures.hang import HangReport
from mgtutor.diagnostics.failures.hang_watch import HangAlert, take_report
from mgtutor.training.runs.records.record import RunRecord
from mgtutor.tui.widgets.hang_panel import HangPanel


class HangHook:
    """Needs `self.record`, `self.app`, `self.query_one` and `self.notify` (a Screen's)."""

    record: RunRecord | None

    def post_hangs(self, record: RunRecord, alerts: list[Any]) -> None:
        for alert in alerts:
            if isinstance(alert, HangAlert) and alert.report is not None:
                self.post_hang(record, alert.report)

    def post_hang(self, record: RunRecord, report: HangReport) -> None:
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
        self.app.call_from_thread(self.show_hang, record.run_id, said, stacks)  # type: ignore[attr-defined]

    def show_hang(self, run_id: str, report: dict[str, Any], stacks: dict[int, str]) -> None:
        if self.record is not None and self.record.run_id == run_id:
            self.query_one(HangPanel).show(report, stacks)  # type: ignore[attr-defined]

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
        self.app.call_from_thread(self.notify,  # type: ignore[attr-defined]
                                  _("stacks taken in {seconds:.2f} s: {kind}").format(
                                      seconds=capture.seconds, kind=report.kind or _("no known hang")))
