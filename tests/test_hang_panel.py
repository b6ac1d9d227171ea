"""The Monitor's hang panel, in a real Textual app (Pilot): hidden until a report, then the per-rank
"where" lines and one folded stack per rank, usable at 80×24."""
from __future__ import annotations

from pathlib import Path

from textual.app import App, ComposeResult
from textual.widgets import Collapsible, Static

from mgtutor.diagnostics.failures.hang.analyse import analyse_capture
from mgtutor.tui.widgets.hang_panel import HangPanel, title_of, where_text

DATA = Path(__file__).parent / "data" / "hang" / "slow-loader-auto"


class PanelApp(App[None]):
    def compose(self) -> ComposeResult:
        yield HangPanel(id="hang")


def report_and_stacks() -> tuple[dict, dict[int, str]]:
    report = analyse_capture(DATA, world_size=2)
    return report.to_dict(), {r: Path(p).read_text() for r, p in report.stacks.items()}


def test_title_and_where_lines_name_the_odd_rank():
    report, _ = report_and_stacks()
    assert title_of(report) == "hang: rank_outside_collective — rank 1"
    text = where_text(report).plain
    assert "▶ rank 1: data: DataLoader at hang.py:56 in slow_loader; worker" in text
    assert "  rank 0: collective: all_reduce at hang.py:58 in slow_loader" in text
    assert "fix: Find why rank 1 did not reach the collective" in text


async def test_panel_hidden_until_a_report_then_folds_open():
    report, stacks = report_and_stacks()
    app = PanelApp()
    async with app.run_test(size=(80, 24)) as pilot:
        panel = app.query_one(HangPanel)
        assert not panel.display or not panel.has_class("-visible")
        panel.show(report, stacks)
        await pilot.pause()
        assert panel.has_class("-visible") and panel.collapsed
        assert panel.title == "hang: rank_outside_collective — rank 1"
        panel.collapsed = False
        await pilot.pause()
        folded = [c for c in panel.query(Collapsible) if c is not panel]
        assert [c.title for c in folded] == ["rank 0 stack", "rank 1 stack"]
        assert all(c.collapsed for c in folded)
        where = str(app.query_one("#hang-where", Static).render())
        assert "rank 1" in where
        panel.show(report, stacks)  # a second report replaces the stacks, never doubles them
        await pilot.pause()
        assert len([c for c in panel.query(Collapsible) if c is not panel]) == 2
        panel.clear()
        assert not panel.has_class("-visible")
