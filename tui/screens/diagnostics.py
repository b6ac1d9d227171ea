"""Diagnostics mode: the doctor checklist, the GPU topology, the all-reduce bench run live, and the
rendezvous probe. Everything runs in thread workers (doctor asks torch in a subprocess; the bench
and probe are torchrun runs the App owns); the last results are saved and shown at once."""
from __future__ import annotations

import time
from typing import Any

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Header, Input, ProgressBar, Static, TabbedContent, TabPane

from mgtutor.diagnostics.doctor import saved
from mgtutor.diagnostics.bench.sizes import format_size
from mgtutor.training.foundation.i18n import N_, _, current_language
from mgtutor.training.runs.launch.disk import os_error_words
from mgtutor.training.runs.launch.launcher import said_device_note
from mgtutor.tui.messages import RunStarted
from mgtutor.tui.options.bench import bench_options_from_words
from mgtutor.tui.options.flags import OptionError
from mgtutor.tui.options.probe import ProbeForm
from mgtutor.tui.screens.from_thread import call_on_screen
from mgtutor.tui.widgets.mode_footer import ModeFooter
from mgtutor.tui.widgets.diagnostics_text import (BENCH_COLUMNS, RANK_COLUMNS, bench_cells, checklist_text,
                                                 rank_cells, topology_text)
from mgtutor.tui.widgets.bandwidth_chart import BandwidthChart

DEFAULT_BENCH_ARGS = "--check"
DEFAULT_PROBE_ARGS = "--timeout 30"


class DiagnosticsScreen(Screen):
    TITLE = N_("Diagnostics")
    BINDINGS = [
        Binding("c", "doctor", N_("Check"), tooltip=N_("run the doctor again")),
        Binding("b", "bench", N_("Bench"), tooltip=N_("all-reduce bandwidth, with the All-reduce tab's options")),
        Binding("p", "probe", N_("Probe"), tooltip=N_("rendezvous probe, with the Rendezvous tab's options")),
        Binding("y", "copy_report", N_("Copy"), tooltip=N_("copy the doctor report as Markdown (for a bug report)")),
        Binding("s", "stop", N_("Stop"), tooltip=N_("stop the bench or the probe")),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.doctor_report: dict[str, Any] | None = None
        self.bench_report: dict[str, Any] | None = None
        self.probe_report: dict[str, Any] | None = None
        self.current_run: Any = None
        self.busy: set[str] = set()
        self.language = current_language()  # the words on screen are in it

    def compose(self) -> ComposeResult:
        yield Header()
        with TabbedContent(id="diag-tabs"):
            with TabPane(_("Doctor"), id="tab-doctor"):
                with VerticalScroll():
                    yield Static(_("Checking this machine... (torch answers from a subprocess)"), id="doctor-status")
                    yield Static("", id="doctor-checks")
            with TabPane(_("Topology"), id="tab-topology"):
                with VerticalScroll():
                    yield Static(_("Press c: the topology comes with the doctor report."), id="topology-view")
            with TabPane(_("All-reduce"), id="tab-bench"):
                with VerticalScroll():
                    yield Input(DEFAULT_BENCH_ARGS, id="bench-args",
                                placeholder=_("options as for `mgtutor bench allreduce` (enter or b runs)"))
                    yield ProgressBar(id="bench-progress", show_eta=False)
                    yield Static("", id="bench-status")
                    yield DataTable(id="bench-table", zebra_stripes=True)
                    yield BandwidthChart(id="bench-chart")
                    yield Static("", id="bench-verdict")
            with TabPane(_("Rendezvous"), id="tab-probe"):
                with VerticalScroll():
                    yield Input(DEFAULT_PROBE_ARGS, id="probe-args",
                                placeholder=_("options as for `mgtutor doctor --rendezvous` (enter or p runs)"))
                    yield Static("", id="probe-status")
                    yield DataTable(id="probe-table", zebra_stripes=True)
                    yield Static("", id="probe-message")
        yield ModeFooter()

    def on_mount(self) -> None:
        self._add_columns()
        self.load_saved()
        self.action_doctor()  # what the user came for; the saved report shows meanwhile

    def _add_columns(self) -> None:
        self.query_one("#bench-table", DataTable).add_columns(*(_(column) for column in BENCH_COLUMNS))
        self.query_one("#probe-table", DataTable).add_columns(*(_(column) for column in RANK_COLUMNS))

    async def on_screen_resume(self) -> None:
        """The language was switched on Home: the same reports, said again (a bench or probe that is
        running goes on; its rows come back when it ends)."""
        if self.language == current_language():
            return
        self.language = current_language()
        await self.recompose()
        self._add_columns()
        if self.doctor_report is not None:
            self.show_doctor(self.doctor_report, checking="doctor" in self.busy)
        if self.bench_report is not None and "bench" not in self.busy:
            self.show_bench(self.bench_report, saved_note=True)
        if self.probe_report is not None and "probe" not in self.busy:
            self.show_probe(self.probe_report, saved_note=True)

    @work(thread=True, group="diag-load")
    def load_saved(self) -> None:
        found = {kind: saved.load(kind) for kind in saved.KINDS}
        call_on_screen(self, self._show_saved, found)

    def _show_saved(self, found: dict[str, dict[str, Any] | None]) -> None:
        if found["doctor"] and self.doctor_report is None:
            self.show_doctor(found["doctor"], saved_note=True, checking="doctor" in self.busy)
        if found["allreduce"] and self.bench_report is None and "bench" not in self.busy:
            self.show_bench(found["allreduce"], saved_note=True)
        if found["rendezvous"] and self.probe_report is None and "probe" not in self.busy:
            self.show_probe(found["rendezvous"], saved_note=True)

    # doctor -----------------------------------------------------------------------------------
    def action_doctor(self) -> None:
        if "doctor" in self.busy:
            return
        self.busy.add("doctor")
        self.query_one(TabbedContent).active = "tab-doctor"
        self.query_one("#doctor-status", Static).update(_("Checking... (torch answers from a subprocess)"))
        self.run_doctor()

    @work(thread=True, group="doctor")
    def run_doctor(self) -> None:
        from mgtutor.diagnostics.doctor.report import collect

        try:
            report = collect()
        except Exception as exc:  # show it; never kill the app
            call_on_screen(self, self._doctor_failed, f"{type(exc).__name__}: {exc}")
            return
        try:
            saved.save("doctor", report)
        except OSError as exc:  # the report says why in its state_folder check; it is shown all the same
            call_on_screen(self, self.notify, _("this report is not kept for the Diagnostics screen: {why}").format(
                why=os_error_words(exc)), severity="warning")
        call_on_screen(self, self.show_doctor, report)

    def _doctor_failed(self, why: str) -> None:
        self.busy.discard("doctor")
        self.query_one("#doctor-status", Static).update(Text(_("The check failed: {why}").format(why=why)))

    def show_doctor(self, report: dict[str, Any], saved_note: bool = False, checking: bool = False) -> None:
        if not checking:
            self.busy.discard("doctor")
        self.doctor_report = report
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(report.get("generated", time.time())))
        if checking:
            note = _("saved report from {when}; checking again...").format(when=when)
        elif saved_note:
            note = _("saved report from {when} - c checks again").format(when=when)
        else:
            note = _("checked {when} - y copies the report (Markdown), c checks again").format(when=when)
        self.query_one("#doctor-status", Static).update(note)
        self.query_one("#doctor-checks", Static).update(checklist_text(report))
        self.query_one("#topology-view", Static).update(topology_text(report))

    def action_copy_report(self) -> None:
        from mgtutor.diagnostics.doctor.report import render_markdown

        if self.doctor_report is None:
            self.notify(_("No report yet: the check is running (c runs it again)."), severity="warning")
            return
        text = render_markdown(self.doctor_report)
        self.app.copy_to_clipboard(text)
        try:
            path = saved.save_markdown("doctor", text + "\n")
        except OSError as exc:
            self.notify(_("Report (Markdown) copied to the clipboard; not written: {why}").format(
                why=os_error_words(exc)), severity="warning")
            return
        self.notify(_("Report (Markdown) copied to the clipboard and written to {path}").format(path=path))

    # all-reduce bench -------------------------------------------------------------------------
    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "bench-args":
            self.action_bench()
        elif event.input.id == "probe-args":
            self.action_probe()

    def action_bench(self) -> None:
        if self.busy & {"bench", "probe"}:
            self.notify(_("A bench or probe is running: s stops it."), severity="warning")
            return
        self.query_one(TabbedContent).active = "tab-bench"
        try:
            options = bench_options_from_words(self.query_one("#bench-args", Input).value)
        except OptionError as exc:
            self.query_one("#bench-status", Static).update(Text(_("Cannot start: {why}").format(why=exc)))
            return
        self.busy.add("bench")
        self.query_one("#bench-status", Static).update(_("starting the ranks..."))
        self.launch_bench(options)

    @work(thread=True, group="bench")
    def launch_bench(self, options: Any) -> None:
        """Planning asks NVML and launching spawns torchrun: both off the event loop."""
        from mgtutor.diagnostics.bench.allreduce_bench import collect, start
        from mgtutor.training.runs.launch.launcher import LaunchError, LaunchSpec, plan

        try:
            sizes = options.sizes(plan(LaunchSpec(target=[], nproc=options.nproc, backend=options.backend)).backend)
            run = start(options)
        except LaunchError as exc:  # a launch refusal: shown, not raised
            call_on_screen(self, self._bench_refused, str(exc))
            return
        self.post_message(RunStarted(run))
        call_on_screen(self, self._bench_started, run, sizes)
        report = collect(run, on_rows=lambda rows: call_on_screen(self, self.add_bench_rows, rows))
        saved.save("allreduce", report)
        call_on_screen(self, self.show_bench, report)

    def _bench_refused(self, why: str) -> None:
        self.busy.discard("bench")
        self.query_one("#bench-status", Static).update(Text(_("Cannot start: {why}").format(why=why)))

    def _bench_started(self, run: Any, sizes: list[int]) -> None:
        self.current_run = run
        self.bench_report = None
        self.query_one("#bench-table", DataTable).clear()
        self.query_one("#bench-chart", BandwidthChart).set_points([])
        self.query_one("#bench-verdict", Static).update("")
        self.query_one("#bench-progress", ProgressBar).update(total=len(sizes), progress=0)
        meta = run.record.meta()
        self.query_one("#bench-status", Static).update(Text(_(
            "{ranks} rank(s), {backend} - {device}; {count} sizes {first}...{last}; s stops").format(
            ranks=meta.world_size, backend=meta.backend, device=said_device_note(meta),
            count=len(sizes), first=format_size(sizes[0]), last=format_size(sizes[-1]))))

    def add_bench_rows(self, rows: list[dict[str, Any]]) -> None:
        self.query_one("#bench-table", DataTable).add_row(*bench_cells(rows))
        self.query_one("#bench-chart", BandwidthChart).add(rows[0]["bytes"], max(r["busbw_gbps"] for r in rows))
        self.query_one("#bench-progress", ProgressBar).advance(1)

    def show_bench(self, report: dict[str, Any], saved_note: bool = False) -> None:
        self.busy.discard("bench")
        self.bench_report = report
        rows = report.get("rows", [])
        if saved_note:
            table = self.query_one("#bench-table", DataTable)
            table.clear()
            for i in range(0, len(rows) - 1, 2):
                table.add_row(*bench_cells(rows[i:i + 2]))
            self.query_one("#bench-chart", BandwidthChart).set_points([(r["bytes"], r["busbw_gbps"]) for r in rows])
            self.query_one("#bench-status", Static).update(Text(
                _("last bench: {ranks} rank(s), {backend} - b runs again").format(
                    ranks=report.get("world_size"), backend=report.get("backend"))))
        avg = report.get("avg_busbw_gbps")
        self.query_one("#bench-verdict", Static).update(Text(
            (_("avg busbw {gbps:.2f} GB/s. ").format(gbps=avg) if avg is not None else "")
            + str(getattr(report, "said", None) or report.get("verdict", ""))))  # a saved report: its English

    # rendezvous probe -------------------------------------------------------------------------
    def action_probe(self) -> None:
        if self.busy & {"bench", "probe"}:
            self.notify(_("A bench or probe is running: s stops it."), severity="warning")
            return
        self.query_one(TabbedContent).active = "tab-probe"
        try:
            form = ProbeForm.from_words(self.query_one("#probe-args", Input).value)
        except OptionError as exc:
            self.query_one("#probe-status", Static).update(Text(_("Cannot start: {why}").format(why=exc)))
            return
        self.busy.add("probe")
        self.query_one("#probe-status", Static).update(_("starting the ranks..."))
        self.launch_probe(form)

    @work(thread=True, group="probe")
    def launch_probe(self, form: ProbeForm) -> None:
        from mgtutor.diagnostics.doctor.rendezvous_probe import start, wait
        from mgtutor.training.runs.launch.launcher import LaunchError, LaunchSpec, plan

        try:
            world = plan(LaunchSpec(target=[], nproc=form.nproc, backend=form.backend)).nproc
            options = form.validate(world).options()
            run = start(options)
        except (OptionError, LaunchError) as exc:  # shown, not raised
            call_on_screen(self, self._probe_refused, str(exc))
            return
        self.post_message(RunStarted(run))
        call_on_screen(self, self._probe_started, run, options)
        report = wait(run, options)
        saved.save("rendezvous", report)
        call_on_screen(self, self.show_probe, report)

    def _probe_refused(self, why: str) -> None:
        self.busy.discard("probe")
        self.query_one("#probe-status", Static).update(Text(_("Cannot start: {why}").format(why=why)))

    def _probe_started(self, run: Any, options: Any) -> None:
        self.current_run = run
        self.query_one("#probe-table", DataTable).clear()
        self.query_one("#probe-message", Static).update("")
        self.query_one("#probe-status", Static).update(Text(
            _("{ranks} rank(s) joining; waiting up to {seconds:g} s... s stops").format(
                ranks=run.record.meta().world_size, seconds=options.timeout)))

    def show_probe(self, report: dict[str, Any], saved_note: bool = False) -> None:
        self.busy.discard("probe")
        self.probe_report = report
        table = self.query_one("#probe-table", DataTable)
        table.clear()
        for entry in report["ranks"]:
            table.add_row(*rank_cells(entry))
        mark = "✓" if report["ok"] else "✗"
        advice = "" if report["ok"] else "\n" + _("check: ") + "\n       ".join(_(a) for a in report["advice"])
        message = getattr(report, "said", None) or report["message"]  # a saved report: its English
        self.query_one("#probe-message", Static).update(Text(f"{mark} {message}{advice}"))
        if saved_note:
            self.query_one("#probe-status", Static).update(_("last probe (saved) - p probes again"))
        else:
            self.query_one("#probe-status", Static).update(Text(_("logs: {path}").format(path=report["run_dir"])))

    def action_stop(self) -> None:
        run = self.current_run
        if run is not None and run.running():
            self.notify(_("Stopping every rank..."))
            self.stop_run(run)

    @work(thread=True, group="stop")
    def stop_run(self, run: Any) -> None:
        run.stop(grace=5)
