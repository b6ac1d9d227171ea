"""The Textual app: six modes, one key each; the App owns every run it starts.

Screens talk to it by messages (tui/messages.py): it tracks the runs they start, opens the lesson
or run they ask for, and stops runs in a thread worker when the user quits.
"""
from __future__ import annotations

from textual import work
from textual.binding import Binding

from mgtutor.training.foundation.i18n import N_, _
from mgtutor.training.runs.launch.launcher import Run
from mgtutor.training.runs.records.record import RunRecord, runs_root
from mgtutor.tui.messages import AttachRun, FindBatch, FitScript, OpenLesson, OpenRun, RunStarted, ShowLesson
from mgtutor.tui.screens.diagnostics import DiagnosticsScreen
from mgtutor.tui.screens.help import HelpScreen
from mgtutor.tui.screens.home import HomeScreen
from mgtutor.tui.screens.lessons import LessonsScreen
from mgtutor.tui.screens.monitor import MonitorScreen
from mgtutor.tui.screens.quit import QuitScreen
from mgtutor.tui.screens.runs import RunsScreen
from mgtutor.tui.screens.troubleshoot import TroubleshootScreen
from mgtutor.tui.textual_words import SaysTextualWords, install_line_breaking

install_line_breaking()  # Chinese lines break as Chinese: never before "，", never inside a name


class MgTutorApp(SaysTextualWords):
    TITLE = "mgtutor"
    CSS_PATH = "mgtutor.tcss"
    MODES = {
        "home": HomeScreen,
        "lessons": LessonsScreen,
        "diagnostics": DiagnosticsScreen,
        "monitor": MonitorScreen,
        "troubleshoot": TroubleshootScreen,
        "runs": RunsScreen,
    }
    DEFAULT_MODE = "home"
    # The mode keys stay out of the footer (80 columns are for the screen's own keys); ? lists them.
    BINDINGS = [
        Binding("h", "switch_mode('home')", N_("Home"), show=False),
        Binding("l", "switch_mode('lessons')", N_("Lessons"), show=False),
        Binding("d", "switch_mode('diagnostics')", N_("Diagnostics"), show=False),
        Binding("m", "switch_mode('monitor')", N_("Monitor"), show=False),
        Binding("t", "switch_mode('troubleshoot')", N_("Troubleshoot"), show=False),
        Binding("r", "switch_mode('runs')", N_("Runs"), show=False),
        Binding("question_mark", "help", N_("Help"), key_display="?"),
        Binding("q", "request_quit", N_("Quit")),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.active_runs: dict[str, Run] = {}  # runs this app started; screens come and go, runs stay

    def on_run_started(self, message: RunStarted) -> None:
        self.track_run(message.run)

    def track_run(self, run: Run) -> None:
        self.active_runs[run.record.run_id] = run

    async def on_open_lesson(self, message: OpenLesson) -> None:
        if self.current_mode != "lessons":
            await self.switch_mode("lessons")
        self.screen.post_message(ShowLesson(message.lesson_id))

    async def on_open_run(self, message: OpenRun) -> None:
        owned = self.active_runs.get(message.run_id)
        record = owned.record if owned else RunRecord(runs_root() / message.run_id)
        if self.current_mode != "monitor":
            await self.switch_mode("monitor")
        self.screen.post_message(AttachRun(record, owned))

    async def on_find_batch(self, message: FindBatch) -> None:
        if self.current_mode != "troubleshoot":
            await self.switch_mode("troubleshoot")
        self.screen.post_message(FitScript(message.record))

    def running_runs(self) -> list[Run]:
        return [run for run in self.active_runs.values() if run.running()]

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(self.screen))

    def action_request_quit(self) -> None:
        running = self.running_runs()
        if not running:
            self.exit()
            return

        def decide(choice: str | None) -> None:
            if choice == "stop":
                self.notify(_("stopping {count} run(s)...").format(count=len(running)))
                self.stop_runs_then_exit(running)
            elif choice == "leave":
                self.exit()

        self.push_screen(QuitScreen(len(running)), decide)

    @work(thread=True, exclusive=True, group="quit")
    def stop_runs_then_exit(self, runs: list[Run]) -> None:
        """Stopping waits for every rank to go (up to its grace period): never on the event loop."""
        for run in runs:
            run.stop()
        self.call_from_thread(self.exit)


def run_app() -> int:
    """The TUI until it quits; its exit status is the app's: 1 after a crash Textual caught, never 0."""
    app = MgTutorApp()
    app.run()
    return app.return_code or 0
