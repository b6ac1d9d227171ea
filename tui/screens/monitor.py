"""Monitor mode: launch a run, then watch its state, every rank's log, the meters and the charts.

One thread worker follows the run through its feed (training/runs/follow/feed.py: logs, events, state at
4 Hz, the live detectors and the hang watch once a second, the meters at ≤ 1 Hz, the diagnosis at the
end), posts one batched `RunUpdate` per update and waits when the UI falls behind.
The run itself belongs to the App: leaving this mode or closing the UI never stops it.
"""
from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import Screen
from textual.widgets import ContentSwitcher, Header
from textual.worker import get_current_worker

from mgtutor.training.foundation.i18n import N_, _
from mgtutor.diagnostics.check.script import CheckError, check_file
from mgtutor.diagnostics.failures.classify import Finding
from mgtutor.diagnostics.feed import open_feed
from mgtutor.training.runs.forensics.compile_crash import CompileCrash, without_compiling
from mgtutor.training.runs.launch.launcher import LaunchError, LaunchSpec, Run, launch
from mgtutor.training.runs.records.record import RunRecord
from mgtutor.training.runs.follow.runstate import RunState
from mgtutor.training.runs.follow.detectors import Alert
from mgtutor.training.runs.follow.feed import Watch
from mgtutor.tui.messages import AttachRun, FindBatch, OpenLesson, RunStarted
from mgtutor.tui.screens.confirm import ConfirmScreen
from mgtutor.tui.screens.from_thread import call_on_screen
from mgtutor.tui.screens.monitor_hang import HangHook
from mgtutor.tui.screens.monitor_worker import CheckDone, RunUpdate, script_of
from mgtutor.tui.screens.report_key import report_in_background
from mgtutor.tui.screens.patch import OffersPatch
from mgtutor.tui.widgets.check_panel import CheckPanel
from mgtutor.tui.widgets.gpu_meters import GpuMeters
from mgtutor.tui.widgets.hang_panel import HangPanel
from mgtutor.tui.widgets.launch_form import LaunchForm
from mgtutor.tui.widgets.mode_footer import ModeFooter
from mgtutor.tui.widgets.rank_logs import MERGED, TORCHRUN, RankLogs, neutralise
from mgtutor.tui.widgets.run_state import AlertBanner, FailureBanner, NodeLine, RunStateLine
from mgtutor.tui.widgets.training_charts import TrainingCharts

RUN_KEYS = {"stop", "follow", "search", "next_match", "first_error", "prev_tab", "next_tab", "full_log",
            "copy_path", "new_run", "open_lesson", "toggle_check", "stacks", "report"}


class MonitorScreen(HangHook, OffersPatch, Screen):
    TITLE = N_("Monitor")
    AUTO_FOCUS = "#f-kind"  # the launch form's first field: Enter launches at once
    BINDINGS = [
        # the footer shows what fits 80 columns; ? lists them all
        Binding("s", "stop", N_("Stop")),
        Binding("p", "follow", N_("Pause"), tooltip=N_("pause the log where it is / follow it again")),
        Binding("slash", "search", N_("Find"), key_display="/", tooltip=N_("find a word in the log (n: next match)")),
        Binding("n", "next_match", N_("Next match"), show=False),
        Binding("e", "first_error", N_("Error"), tooltip=N_("jump to the first error in the log")),
        Binding("left_square_bracket", "prev_tab", N_("Previous log tab"), key_display="[", show=False),
        Binding("right_square_bracket", "next_tab", N_("Tab"), key_display="]",
                tooltip=N_("next log tab (all, each rank, torchrun)")),
        Binding("f", "full_log", N_("Log"), tooltip=N_("the full log files in $PAGER")),
        Binding("c", "copy_path", N_("Copy run folder"), show=False),
        Binding("o", "open_lesson", N_("Lesson"), tooltip=N_("open the lesson that explains this failure")),
        Binding("k", "toggle_check", N_("Check"), tooltip=N_("show or hide what mgtutor check found in the script")),
        Binding("F", "show_patch", N_("Fixes"), key_display="F", show=False,
                tooltip=N_("the fixes mgtutor check --fix would write into the script, as a diff (a: apply)")),
        Binding("x", "stacks", N_("Stacks"), show=False,
                tooltip=N_("take every rank's Python stack now: where each one waits, and why")),
        Binding("N", "new_run", N_("New"), key_display="N", tooltip=N_("back to the launch form (a running run goes on)")),
        Binding("b", "report", N_("Report"), show=False, tooltip=N_("write this run's report: one HTML file to hand on")),
        Binding("B", "find_batch", N_("Batch"), key_display="B", show=False,
                tooltip=N_("out of memory: find the batch that fits this run's script (mgtutor fit)")),
    ]
    clock: Callable[[], float] = staticmethod(time.time)
    make_sampler: Callable[[], Any] | None = None  # the feed's sampler (tests put fixed readings here)
    rendezvous_after = Watch.rendezvous_after  # s before a rank missing at the rendezvous is named (PyTorch: 10–30 min)
    silent_after = Watch.silent_after  # s without output or event before a run is flagged as possibly hung

    def __init__(self) -> None:
        super().__init__()
        self.record: RunRecord | None = None
        self.run: Run | None = None
        self.state: RunState | None = None
        self.finding: Finding | None = None
        self.lines_seen = 0
        self.check_token = 0  # which launch the check panel belongs to
        self.launched: dict[str, LaunchSpec] = {}  # the spec of each run started here, by run id

    def compose(self) -> ComposeResult:
        yield Header()
        with ContentSwitcher(initial="launch-form", id="monitor-switch"):
            yield LaunchForm(id="launch-form")
            with Vertical(id="run-view"):
                yield RunStateLine(id="run-state")
                yield NodeLine(id="node-line")
                yield AlertBanner(id="alert-banner")
                yield HangPanel(id="hang-panel")
                yield FailureBanner(id="failure-banner")
                yield CheckPanel(id="check-panel")
                yield GpuMeters(id="gpu-meters")
                yield TrainingCharts(id="training-charts")
                yield RankLogs(id="rank-logs")
        yield ModeFooter()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in RUN_KEYS and self.record is None:
            return False
        if action == "stop":
            return self.state is not None and not self.state.done
        if action == "toggle_check":
            return self.query_one(CheckPanel).has_class("-visible")
        if action == "show_patch":
            return self.query_one(CheckPanel).fixable > 0
        if action == "open_lesson":
            return bool(self.query_one(FailureBanner).lesson)
        return True

    # launching and attaching
    def on_launch_form_submitted(self, event: LaunchForm.Submitted) -> None:
        self.query_one(LaunchForm).show_message("starting…")
        self.check_token += 1
        script = script_of(event.spec)
        panel = self.query_one(CheckPanel)
        panel.reset()
        if script is not None:
            panel.checking(script)
            self.check_script(script, self.check_token)  # beside the launch, never before it
        self.start_run(event.spec)

    @work(thread=True, exclusive=True, group="monitor-check")
    def check_script(self, script: str, token: int) -> None:
        findings: list[dict[str, Any]] = []
        error = None
        try:
            findings = [f.to_json() for f in check_file(script)]
        except CheckError as exc:
            error = str(exc)
        except Exception as exc:  # the run goes on whatever the checker thinks of the script
            error = _("the check stopped: {why}").format(why=repr(exc))
        self.post_message(CheckDone(token, script, findings, error))

    def on_check_done(self, message: CheckDone) -> None:
        if message.token == self.check_token:
            self.query_one(CheckPanel).show(message.script, message.findings, message.error)
            self.refresh_bindings()

    @work(thread=True, exclusive=True, group="monitor-launch")
    def start_run(self, spec: Any) -> None:
        try:
            run = launch(spec)
        except LaunchError as exc:
            why = str(exc)
            call_on_screen(self, lambda: self.query_one(LaunchForm).show_message(why))
            return
        call_on_screen(self, self._launched, run, spec)

    def _launched(self, run: Run, spec: LaunchSpec) -> None:
        self.launched[run.record.run_id] = spec
        self.post_message(RunStarted(run))
        self.attach(run.record, run, keep_check=True)

    def attach(self, record: RunRecord, run: Run | None = None, alive: Callable[[], bool] | None = None,
               keep_check: bool = False) -> None:
        """Show `record` (a run started here, or one found in the run directories)."""
        if not keep_check:  # the check panel belongs to the launch that made it
            self.check_token += 1
            self.query_one(CheckPanel).reset()
        self.record, self.run = record, run or Run(record)
        self.state, self.finding, self.lines_seen = None, None, 0
        self.query_one(RankLogs).reset()
        self.query_one(AlertBanner).show([])
        self.clear_hang()
        self.query_one(NodeLine).show(None)
        self.query_one(ContentSwitcher).current = "run-view"
        self.sub_title = record.run_id
        # a run this app started or owns records its meters here (a reattached one: its own command does)
        self.watch_run(record, alive or (run.running if run else None), record_samples=run is not None)
        self.query_one("#rank-log").focus()
        self.refresh_bindings()

    @work(thread=True, exclusive=True, group="monitor-watch")
    def watch_run(self, record: RunRecord, alive: Callable[[], bool] | None, record_samples: bool = False) -> None:
        """Turn the run's feed into RunUpdate messages, waiting when the UI falls behind."""
        worker = get_current_worker()
        watch = Watch(rendezvous_after=self.rendezvous_after, silent_after=self.silent_after,
                      record_samples=record_samples, show_meters=True, nodes=True,
                      compile_crash=record.run_id in self.launched)
        feed = open_feed(record, watch=watch, meters=self.make_sampler, clock=self.clock, alive=alive)
        meters = None
        for update in feed.updates():
            if worker.is_cancelled:
                return
            lines = [(rank, stream, neutralise(text)) for rank, stream, text in update.lines]
            meters = update.meters or meters
            if update.final:
                finding = update.findings[0] if update.findings and update.failed else None
                self.post_message(RunUpdate(record.run_id, lines, update.state, meters, finding, alerts=[],
                                            node=update.node, compile_crash=update.compile_crash))
                return
            self.post_hangs(record, update.new_alerts)  # the hang panel: where each rank waits, stacks folded
            state = update.state
            alerts = None if update.alerts is None or state is None else self.visible_alerts(update.alerts, state)
            self.post_message(RunUpdate(record.run_id, lines, state, meters if state else None,
                                        alerts=alerts, node=update.node))
            while self.message_queue_size > 8 and not worker.is_cancelled:
                time.sleep(0.02)  # back-pressure: the UI is behind, let it catch up

    @staticmethod
    def visible_alerts(alerts: list[Alert], state: RunState) -> list[Alert]:
        """A "late" rank is only news while another waits: when no rank is at the rendezvous the
        script may simply not use one yet."""
        world = state.world_size or len(state.ranks)
        return [a for a in alerts if not (a.kind == "rendezvous_late" and len(a.ranks) >= world)]

    def on_run_update(self, message: RunUpdate) -> None:
        if self.record is None or message.run_id != self.record.run_id:
            return  # a late message of a run no longer shown
        self.lines_seen += len(message.lines)
        self.query_one(RankLogs).add_lines(message.lines, message.prepared)
        if message.alerts is not None:
            self.query_one(AlertBanner).show(message.alerts)
        if message.node is not None:
            self.query_one(NodeLine).show(message.node)
        if message.state is None:
            return
        first = self.state is None
        was_done = self.state is not None and self.state.done
        self.state = message.state
        if first:
            self.refresh_bindings()  # stop becomes possible once the run's state is known
        if message.state.world_size:
            self.query_one(RankLogs).ensure_tabs(range(message.state.world_size))
        self.query_one(RunStateLine).show(message.state, self.clock())
        if message.sample is not None:
            gpus, host = message.sample
            self.query_one(GpuMeters).show(gpus, host, message.state.pids(), message.state.backend)
        self.query_one(TrainingCharts).show(message.state)
        if message.state.done:
            self.finding = message.finding
            self.query_one(FailureBanner).show(message.state, message.finding)
            if not was_done:
                self.refresh_bindings()
            # only the final update carries it, and a poll may have shown the run ended before that one
            if message.compile_crash is not None and message.run_id in self.launched:
                self.train_again_without_compiling(message.run_id, message.compile_crash)

    def train_again_without_compiling(self, run_id: str, crash: CompileCrash) -> None:
        """The compiler crashed, not the training: the same launch again with --compile off (as
        `mgtutor train` does); the failed run stays in Runs. One node of several only says so."""
        spec = self.launched.pop(run_id)  # once: a reattach to the failed run does not train again
        target = without_compiling(spec.target)
        if target is None:
            return
        self.notify(crash.said(spec.nnodes), severity="warning", timeout=20)
        if spec.nnodes == 1:
            self.start_run(replace(spec, target=target))

    # keys
    def action_stop(self) -> None:
        run = self.run
        if run is None or self.state is None or self.state.done:
            return

        def decided(yes: bool | None) -> None:
            if yes:
                self.notify(_("stopping every rank..."))
                self.app.run_worker(run.stop, thread=True, group="stop-runs")  # the App's: survives this screen

        self.app.push_screen(ConfirmScreen(_("Stop run {run_id}?\nEvery rank gets SIGTERM, then SIGKILL after 10 s.").format(
            run_id=run.record.run_id), yes=_("Stop (y)"), no=_("Keep running (n)")), decided)

    def action_show_patch(self) -> None:
        self.show_patch_of(self.query_one(CheckPanel).script)

    def patch_written(self) -> None:
        panel = self.query_one(CheckPanel)
        if panel.script:
            self.check_token += 1
            script = panel.script
            panel.checking(script)
            self.check_script(script, self.check_token)

    def action_toggle_check(self) -> None:
        panel = self.query_one(CheckPanel)
        panel.collapsed = not panel.collapsed

    def action_follow(self) -> None:
        following = self.query_one(RankLogs).toggle_follow()
        self.notify(_("following the log") if following else _("paused: the log stays where it is (p to follow)"))

    def action_search(self) -> None:
        self.query_one(RankLogs).open_search()

    def action_next_match(self) -> None:
        self.notify(self.query_one(RankLogs).find_next())

    def action_first_error(self) -> None:
        self.notify(self.query_one(RankLogs).first_error())

    def action_prev_tab(self) -> None:
        self.query_one("#log-tabs").action_previous_tab()  # type: ignore[attr-defined]

    def action_next_tab(self) -> None:
        self.query_one("#log-tabs").action_next_tab()  # type: ignore[attr-defined]

    def log_files(self) -> list[str]:
        """The files behind the visible tab: the full log on disk."""
        if self.record is None:
            return []
        active = self.query_one(RankLogs).active
        if active == MERGED:
            return [str(p) for _, _, p in self.record.rank_logs()]
        if active == TORCHRUN:
            return [str(self.record.torchrun_log)]
        rank = int(active.removeprefix("rank"))
        return [str(self.record.rank_log(rank, s)) for s in ("stdout", "stderr")]

    def action_full_log(self) -> None:
        files = [f for f in self.log_files() if os.path.exists(f)]
        if not files:
            return
        pager = os.environ.get("PAGER") or "less"
        try:
            with self.app.suspend():
                subprocess.call([pager, *files])
        except Exception:  # no terminal to hand over (headless, or the pager is missing)
            self.notify(_("full log: {files}").format(files="  ".join(files)), timeout=10)

    def action_copy_path(self) -> None:
        if self.record is not None:
            self.app.copy_to_clipboard(str(self.record.path))
            self.notify(_("run folder (copied): {path}").format(path=self.record.path), timeout=10)

    def action_report(self) -> None:
        if self.record is not None:
            report_in_background(self.app, self.record)

    def action_find_batch(self) -> None:
        if self.record is not None and self.query_one(FailureBanner).kind == "cuda_oom":
            self.post_message(FindBatch(self.record))

    def action_open_lesson(self) -> None:
        lesson = self.query_one(FailureBanner).lesson
        if not lesson:
            return
        self.post_message(OpenLesson(lesson))

    def on_attach_run(self, message: AttachRun) -> None:
        self.attach(message.record, message.run)

    def action_new_run(self) -> None:
        if self.state is not None and not self.state.done:
            self.notify(_("this run goes on; it stays in Runs (r) to reattach"))
        self.workers.cancel_group(self, "monitor-watch")
        self.record, self.run, self.state = None, None, None
        self.sub_title = ""
        self.query_one(FailureBanner).show(RunState(run_id=""))
        self.query_one(AlertBanner).show([])
        self.clear_hang()
        self.query_one(NodeLine).show(None)
        self.check_token += 1
        self.query_one(CheckPanel).reset()
        self.query_one(ContentSwitcher).current = "launch-form"
        self.query_one(LaunchForm).show_message("")
        self.query_one(LaunchForm).focus_first()
        self.refresh_bindings()
