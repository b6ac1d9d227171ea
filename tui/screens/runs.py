"""Runs mode: past and running runs, newest first, read from the run directories."""
from __future__ import annotations

import time

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Static

from mgtutor.training.records import list_runs, runs_root


def run_rows(limit: int = 200) -> list[tuple[str, str, str, str, str, str]]:
    rows = []
    for _, record in zip(range(limit), list_runs()):
        meta, result = record.meta(), record.result()
        first = result.get("first_failure")
        started = time.strftime("%m-%d %H:%M", time.localtime(meta["started"])) if meta.get("started") else "?"
        rows.append((record.run_id, record.status(), str(meta.get("world_size", "?")), meta.get("backend") or "?",
                     started, f"rank {first['rank']}" if first else ""))
    return rows


class RunsScreen(Screen):
    TITLE = "Runs"
    BINDINGS = [Binding("g", "refresh", "Refresh")]

    def compose(self) -> ComposeResult:
        yield Header()
        with Vertical(classes="mode-body"):
            yield Static(f"Run records in {runs_root()}", id="runs-root")
            yield DataTable(id="runs-table", cursor_type="row", zebra_stripes=True)
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_columns("run", "status", "ranks", "backend", "started", "failed first")
        self.action_refresh()

    def on_screen_resume(self) -> None:
        self.action_refresh()

    def action_refresh(self) -> None:
        self.load_runs()

    @work(thread=True, exclusive=True)
    def load_runs(self) -> None:
        rows = run_rows()
        self.app.call_from_thread(self._show, rows)

    def _show(self, rows: list[tuple[str, ...]]) -> None:
        table = self.query_one(DataTable)
        table.clear()
        for row in rows:
            table.add_row(*row, key=row[0])
        if not rows:
            self.query_one("#runs-root", Static).update(
                f"No runs yet in {runs_root()}. Start one from Monitor (m) or with `mgtutor run -- SCRIPT`.")
