"""The `b` key of Runs and Monitor: write the selected run's report (one HTML file) and say where.

The report takes the doctor report too (a child process, a few seconds), so it is written in a
thread worker of the App (leaving the screen does not cancel it); the path comes back as a notice.
"""
from __future__ import annotations

from textual.app import App

from mgtutor.training.foundation.i18n import _
from mgtutor.training.runs.records.record import RunRecord


def report_in_background(app: App, record: RunRecord) -> None:
    app.notify(_("writing the report of {run_id}…").format(run_id=record.run_id))

    def work() -> None:
        from mgtutor.diagnostics.report.render import write_report  # jinja2 and matplotlib: not at start-up

        try:
            path = write_report(record)
        except Exception as exc:  # noqa: BLE001 - say it on screen; the app goes on
            app.call_from_thread(app.notify, _("report not written: {why}").format(why=exc), severity="error",
                                 timeout=10)
            return
        app.call_from_thread(app.notify, _("report: {path}\n(open it in a browser; "
                                           "`mgtutor report {run_id} --markdown` for an issue)").format(
            path=path, run_id=record.run_id), timeout=15)

    app.run_worker(work, thread=True, group="run-report")
