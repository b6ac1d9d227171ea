"""The Textual app: six modes, one key each; the App owns every run it starts."""
from __future__ import annotations

from textual.app import App
from textual.binding import Binding

from mgtutor.training.runs.launcher import Run
from mgtutor.tui.screens.diagnostics import DiagnosticsScreen
from mgtutor.tui.screens.help import HelpScreen
from mgtutor.tui.screens.home import HomeScreen
from mgtutor.tui.screens.lessons import LessonsScreen
from mgtutor.tui.screens.monitor import MonitorScreen
from mgtutor.tui.screens.quit import QuitScreen
from mgtutor.tui.screens.runs import RunsScreen
from mgtutor.tui.screens.troubleshoot import TroubleshootScreen


class MgTutorApp(App[None]):
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
    BINDINGS = [
        Binding("h", "switch_mode('home')", "Home"),
        Binding("l", "switch_mode('lessons')", "Lessons"),
        Binding("d", "switch_mode('diagnostics')", "Diagnostics"),
        Binding("m", "switch_mode('monitor')", "Monitor"),
        Binding("t", "switch_mode('troubleshoot')", "Troubleshoot"),
        Binding("r", "switch_mode('runs')", "Runs"),
        Binding("question_mark", "help", "Help", key_display="?"),
        Binding("q", "request_quit", "Quit"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.active_runs: dict[str, Run] = {}  # runs this app started; screens come and go, runs stay
        self.lesson_to_open: str | None = None  # read by the Lessons screen when it shows

    def open_lesson(self, lesson_id: str) -> None:
        """Show one lesson in Lessons mode (from a diagnosis's "open lesson" key)."""
        self.lesson_to_open = lesson_id
        if self.current_mode == "lessons":
            self.screen.call_later(self.screen._open_requested)
        else:
            self.switch_mode("lessons")

    def track_run(self, run: Run) -> None:
        self.active_runs[run.record.run_id] = run

    def running_runs(self) -> list[Run]:
        return [run for run in self.active_runs.values() if run.running()]

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def action_request_quit(self) -> None:
        running = self.running_runs()
        if not running:
            self.exit()
            return

        def decide(choice: str | None) -> None:
            if choice == "stop":
                for run in running:
                    run.stop()
                self.exit()
            elif choice == "leave":
                self.exit()

        self.push_screen(QuitScreen(len(running)), decide)


def run_app() -> int:
    MgTutorApp().run()
    return 0
