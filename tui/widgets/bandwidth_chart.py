"""Bus bandwidth against message size: one column of block characters per size, log-scale sizes
on the x axis (the sweep is geometric), GB/s on the y axis. Plain text, so it works over SSH."""
from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from mgtutor.diagnostics.bench.sizes import format_size
from mgtutor.training.foundation.i18n import _
from mgtutor.tui.widgets.blocks import block


def render_chart(points: list[tuple[int, float]], height: int = 8, width: int = 76) -> list[str]:
    """Lines of a bar chart of (bytes, GB/s); the best value of each size is drawn."""
    if not points:
        return [_("(no results yet)")]
    best: dict[int, float] = {}
    for size, value in points:
        best[size] = max(value, best.get(size, 0.0))
    sizes = sorted(best)
    top = max(best.values()) or 1.0
    label_w = len(f"{top:.1f}") + 1
    col_w = max(1, min(3, (width - label_w - 2) // max(1, len(sizes))))
    lines = []
    for row in range(height, 0, -1):
        axis = f"{top:.1f}" if row == height else ("0" if row == 1 else "")
        cells = []
        for size in sizes:
            level = best[size] / top * height  # in rows, fractional
            cells.append((block(level - (row - 1)) * (col_w - 1 or 1)).ljust(col_w))
        lines.append(f"{axis:>{label_w}}│" + "".join(cells))
    lines.append(" " * label_w + "└" + "─" * (col_w * len(sizes)))
    ticks = [" "] * (col_w * len(sizes))
    for i in (0, len(sizes) // 2, len(sizes) - 1):  # first, middle, last size
        label = format_size(sizes[i])
        start = min(i * col_w, max(0, len(ticks) - len(label)))
        ticks[start:start + len(label)] = list(label)
    lines.append(" " * (label_w + 1) + "".join(ticks) + "   " + _("busbw GB/s vs message size"))
    return lines


class BandwidthChart(Static):
    """Give it rows as they arrive (`add`), or all at once (`set_points`)."""

    DEFAULT_CSS = "BandwidthChart { height: auto; }"

    def __init__(self, *, id: str | None = None, chart_height: int = 7) -> None:
        super().__init__(id=id)
        self.points: list[tuple[int, float]] = []
        self.chart_height = chart_height

    def on_mount(self) -> None:
        self._redraw()

    def set_points(self, points: list[tuple[int, float]]) -> None:
        self.points = list(points)
        self._redraw()

    def add(self, size: int, busbw: float) -> None:
        self.points.append((size, busbw))
        self._redraw()

    def _redraw(self) -> None:
        width = self.size.width or 76
        self.update(Text("\n".join(render_chart(self.points, self.chart_height, width))))

    def on_resize(self) -> None:
        self._redraw()
