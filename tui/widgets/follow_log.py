"""A `Log` that wraps long lines to its width and follows new lines until the user scrolls away.

Textual's `Log` keeps one row per line (wider lines are cut at the pane's edge and need a
horizontal scrollbar) and follows new lines only while the view already sits at the very end.
Both failed in the Monitor: a trainer line is wider than an 80-column pane, and a reattached run
fills the log before the meters and charts take their rows, so the pane shrank, the view was no
longer at the end, and it stayed there. Here following is a state of its own: while it is on, every
write and every resize ends at the newest line; scrolling up (keys, wheel or scrollbar) turns it
off (a `FollowChanged` message lets the view say so), End or `p` turn it on again.
"""
from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import TYPE_CHECKING

from rich.cells import cell_len, chop_cells
from textual import events
from textual.message import Message
from textual.scrollbar import ScrollTo, ScrollUp
from textual.widgets import Log

if TYPE_CHECKING:
    from typing_extensions import Self

INDENT = "    "  # continuation rows start under the text, past a merged view's `r0│ ` prefix


def wrap_line(line: str, width: int) -> list[str]:
    """`line` as rows of at most `width` cells, broken at a space where one is near."""
    cells = len(line) if line.isascii() else cell_len(line)
    if width <= 2 * len(INDENT) or cells <= width:
        return [line]
    if cells != len(line):  # wide characters: cut by cells, not by characters
        first, *rest = chop_cells(line, width)
        return [first, *(INDENT + row for row in chop_cells("".join(rest), width - len(INDENT)))]
    rows: list[str] = []
    start, room = 0, width
    while len(line) - start > room:
        cut = line.rfind(" ", start + 1, start + room + 1)
        if cut <= start + room // 2:  # no space in the second half of the row: cut the word
            cut = start + room
        rows.append(line[start:cut].rstrip(" "))
        start = cut
        while start < len(line) and line[start] == " ":
            start += 1
        room = width - len(INDENT)
    if start < len(line):
        rows.append(line[start:])
    return [rows[0], *(INDENT + row for row in rows[1:])]


class FollowLog(Log):
    """Keeps the last `max_lines` lines as written, shown wrapped; `auto_scroll` is "following"."""

    DEFAULT_CSS = """
    FollowLog { overflow-x: hidden; scrollbar-gutter: stable; }
    """

    class FollowChanged(Message):
        """Following the newest line was turned on or off (by a key, a jump or the user's scrolling)."""

        def __init__(self, following: bool) -> None:
            super().__init__()
            self.following = following

    def __init__(self, max_lines: int = 2000, **kwargs: object) -> None:
        super().__init__(max_lines=max_lines, **kwargs)  # type: ignore[arg-type]
        self.keep = max_lines
        self.raw: deque[str] = deque()  # the lines as written (the rows are these, wrapped)
        self.row_counts: deque[int] = deque()
        self.wrap_width = 0

    def watch_auto_scroll(self, following: bool) -> None:
        self.post_message(self.FollowChanged(following))

    def _content_width(self) -> int:
        return self.scrollable_content_region.width

    def write_lines(self, lines: Iterable[str], scroll_end: bool | None = None) -> Self:
        width = self.wrap_width = self._content_width()
        rows: list[str] = []
        for line in lines:
            for part in line.splitlines() or [""]:
                wrapped = wrap_line(part, width) if part else [" "]  # the base Log would drop an empty row
                self.raw.append(part)
                self.row_counts.append(len(wrapped))
                rows += wrapped
        while len(self.raw) > self.keep:
            self.raw.popleft()
            self.row_counts.popleft()
        self.max_lines = sum(self.row_counts)  # the base Log drops exactly the rows of the lines let go
        super().write_lines(rows, scroll_end=False)
        if self.auto_scroll if scroll_end is None else scroll_end:
            self.scroll_end(animate=False, immediate=True, x_axis=False)
        return self

    def clear(self) -> Self:
        self.raw.clear()
        self.row_counts.clear()
        return super().clear()

    def row_of(self, index: int) -> int:
        """The first row of the `index`-th kept line (rows of older lines may still be above it)."""
        counts = list(self.row_counts)
        return max(0, self.line_count - sum(counts[index:]))

    def on_resize(self, event: events.Resize) -> None:
        if self._content_width() != self.wrap_width and self.raw:
            kept = list(self.raw)
            top = self.scroll_offset.y
            super().clear()
            self.raw.clear()
            self.row_counts.clear()
            self.write_lines(kept, scroll_end=False)
            if not self.auto_scroll:
                self.scroll_to(y=min(top, self.max_scroll_y), animate=False, immediate=True)
        if self.auto_scroll:
            self.scroll_end(animate=False, x_axis=False)  # after the layout: the pane may have shrunk

    # what the user does to the view: away from the end pauses, End follows again
    def _pause(self) -> None:
        if self.auto_scroll and self.max_scroll_y > 0:
            self.auto_scroll = False

    def action_scroll_up(self) -> None:
        self._pause()
        super().action_scroll_up()

    def action_page_up(self) -> None:
        self._pause()
        super().action_page_up()

    def action_scroll_home(self) -> None:
        self._pause()
        super().action_scroll_home()

    def _on_mouse_scroll_up(self, event: events.MouseScrollUp) -> None:
        self._pause()
        super()._on_mouse_scroll_up(event)

    def _on_scroll_to(self, message: ScrollTo) -> None:  # the scrollbar dragged
        if message.y is not None and message.y < self.max_scroll_y:
            self._pause()
        super()._on_scroll_to(message)

    def _on_scroll_up(self, event: ScrollUp) -> None:  # a click above the scrollbar's thumb
        self._pause()
        super()._on_scroll_up(event)

    def action_scroll_end(self) -> None:
        self.auto_scroll = True
        super().action_scroll_end()
