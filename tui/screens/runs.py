"""Runs mode: past and running runs, newest first, read from the run directories.

enter opens the selected run in Monitor mode: a run still going is reattached live (also one
started by an earlier mgtutor whose terminal went away), a finished one is replayed from its files.
"""
from __future__ import annotations

import time

from rich.markup import escape
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import Screen
from textual.widgets import DataTable, Header, Static

from mgtutor.training.foundation.i18n import N_, _
from mgtutor.training.foundation.terminal import neutralise
from mgtutor.training.runs.records.record import RunRecord, list_runs, runs_root, said_problem
from mgtutor.tui.messages import OpenRun
from mgtutor.tui.run_words import status_word
from mgtutor.tui.screens.report_key import report_in_background
from mgtutor.tui.widgets.mode_footer import ModeFooter


RUN_COLUMN = 22  # characters of the run id shown: with the other columns, 80 in all


PAGE = 200  # rows read and shown at once: reading a record costs a few files


def run_rows(limit: int = PAGE, start: int = 0) -> list[tuple[str, str, str, str, str, str]]:
    return run_page(start, limit)[0]


def run_page(start: int = 0, size: int = PAGE) -> tuple[list[tuple[str, str, str, str, str, str]], int]:
    """The rows of runs start…start+size (newest first), and how many runs there are in all."""
    records = list(list_runs())  # only paths so far: the files are read for the page's rows alone
    rows = []
    for record in records[start:start + size]:
        try:
            rows.append(run_row(record))
        except (OSError, ValueError, TypeError, OverflowError) as exc:  # one bad record hides no other
            rows.append((record.run_id, "unreadable", "?", "?", "?", f"{type(exc).__name__}: {exc}"[:60]))
    return rows, len(records)


def page_line(start: int, shown: int, total: int) -> str:
    """Which runs the table holds, and how to reach the others (nothing is left out unsaid)."""
    where = _("Run records in {path}").format(path=runs_root())
    if total <= shown and start == 0:
        return where
    keys = " · ".join(_(k) for k, more in ((N_("] older"), start + shown < total), (N_("[ newer"), start > 0)) if more)
    which = _("runs {first}–{last} of {total}, newest first").format(first=start + 1, last=start + shown, total=total)
    return f"{where}\n{which}" + (f" · {keys}" if keys else "")


def run_row(record: RunRecord) -> tuple[str, str, str, str, str, str]:
    meta, result = record.meta(), record.result()
    first = result.first_failure
    started = time.strftime("%m-%d %H:%M", time.localtime(meta.started)) if meta.started else "?"
    ranks = str(meta.world_size or "?")
    if meta.nnodes > 1:  # one record per node: say which node this one is
        ranks += f" node {meta.node_rank}/{meta.nnodes}"
    problems = record.problems()
    note = f"rank {first.rank}" if first else (problems[0] if problems else "")
    status = "unreadable" if record.unreadable() else record.status().value
    return (record.run_id, status, ranks, meta.backend or "?", started, note)


def short_id(run_id: str, width: int = RUN_COLUMN) -> str:
    """The run id without its leading date and time (the started column has them), cut to `width`:
    the table then fits 80 columns, the full id stays the row's key (and the Monitor's title)."""
    parts = run_id.split("-", 2)
    rest = parts[2] if len(parts) == 3 and parts[0].isdigit() and parts[1].isdigit() else run_id
    return rest if len(rest) <= width else rest[:width - 1] + "…"


RUN_COLUMNS = (N_("run"), N_("status"), N_("ranks"), N_("backend"), N_("started"), N_("failed"))


class RunsScreen(Screen):
    TITLE = N_("Runs")
    BINDINGS = [Binding("g", "refresh", N_("Refresh")), Binding("enter", "open_run", N_("Open")),
                Binding("b", "report", N_("Report"), tooltip=N_("write the run's report: one HTML file to hand on")),
                Binding("right_square_bracket", "older", N_("Older runs"), key_display="]", show=False,
                        tooltip=N_("the next 200 older runs")),  # 200: PAGE
                Binding("left_square_bracket", "newer", N_("Newer runs"), key_display="[", show=False,
                        tooltip=N_("the 200 newer runs"))]
    start = 0  # the first run on the page (0: the newest)
    total = 0

    def compose(self) -> ComposeResult:
        yield Header()
        with Vertical(classes="mode-body"):
            yield Static(_("Run records in {path}").format(path=runs_root()), id="runs-root")
            yield DataTable(id="runs-table", cursor_type="row", zebra_stripes=True)
        yield ModeFooter()

    def on_screen_resume(self) -> None:
        # Shown for the first time or again: one load (a load on mount as well filled the table twice on opening)
        self.action_refresh()

    def action_refresh(self) -> None:
        self.load_runs(self.start)

    def action_older(self) -> None:
        if self.start + PAGE < self.total:
            self.load_runs(self.start + PAGE)

    def action_newer(self) -> None:
        if self.start > 0:
            self.load_runs(max(0, self.start - PAGE))

    @work(thread=True, exclusive=True)
    def load_runs(self, start: int = 0) -> None:
        rows, total = run_page(start)
        if not rows and start:  # runs were removed meanwhile: the first page
            start = 0
            rows, total = run_page(start)
        self.app.call_from_thread(self._show, rows, start, total)

    def _show(self, rows: list[tuple[str, ...]], start: int = 0, total: int = 0) -> None:
        self.start, self.total = start, total
        table = self.query_one(DataTable)
        selected = _selected_run(table)
        table.clear(columns=True)  # the headers made anew: in the language in force (`z` on Home switches it)
        table.add_columns(*(_(column) for column in RUN_COLUMNS))
        for row in rows:  # a record's backend or a folder's name is neither markup nor an escape sequence
            cells = (short_id(row[0]), status_word(row[1]), *row[2:5], said_problem(row[5]))
            table.add_row(*(escape(neutralise(cell)) for cell in cells), key=row[0])
        if selected is not None and selected in table.rows:  # a load landing late keeps the chosen run
            table.move_cursor(row=table.get_row_index(selected))
        root_line = self.query_one("#runs-root", Static)
        if not rows:
            root_line.update(_("No runs yet in {path}. Start one from Monitor (m) or with `mgtutor run -- SCRIPT`.").format(
                path=runs_root()))
        else:
            root_line.update(page_line(start, len(rows), total))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.post_message(OpenRun(str(event.row_key.value)))

    def action_open_run(self) -> None:
        selected = _selected_run(self.query_one(DataTable))
        if selected is not None:
            self.post_message(OpenRun(selected))

    def action_report(self) -> None:
        selected = _selected_run(self.query_one(DataTable))
        if selected is not None:
            report_in_background(self.app, RunRecord(runs_root() / selected))


def _selected_run(table: DataTable) -> str | None:
    """The run id of the row under the cursor, or None in an empty table."""
    if not table.row_count:
        return None
    row_key, _column = table.coordinate_to_cell_key(table.cursor_coordinate)
    return str(row_key.value)
