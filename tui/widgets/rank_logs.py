"""Per-rank logs: a tab per rank plus a merged view, bounded in memory, cheap at any line rate.

Every tab keeps only its tail in a bounded buffer (the full log is the file in the run
directory). Only the visible tab is written to the one `Log` widget; switching tabs rebuilds
it from that tab's buffer. So 8 ranks × 2,000 lines/s cost the event loop one batched write per
tick, not 16,000 widget updates.
"""
from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from rich.highlighter import Highlighter
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Input, Static, Tab, Tabs

from mgtutor.training.foundation.i18n import N_, _
from mgtutor.training.foundation.terminal import neutralise
from mgtutor.tui.widgets.follow_log import FollowLog

MERGED = "all"
TORCHRUN = "torchrun"
RANK_COLOURS = ("cyan", "magenta", "green", "yellow", "bright_blue", "bright_red", "bright_cyan", "bright_green")
# Literal alternatives only: this runs on every line at thousands of lines/s (no `\\w*` backtracking).
ERROR_LINE = re.compile(r"Traceback \(most recent call last\)|(?:Error|Exception)[:!]|FATAL|out of memory|"
                        r"SIGKILL|Segmentation fault|ChildFailedError")
ERROR_HINTS = ("Traceback", "Error", "Exception", "FATAL", "out of memory", "SIGKILL", "Segmentation")


def tab_id(rank: int | None) -> str:
    return TORCHRUN if rank is None else f"rank{rank}"


def prefix(rank: int | None) -> str:
    return "tr│ " if rank is None else f"r{rank}│ "


@dataclass
class LogBuffer:
    """The tail of one tab, plus where its first error was (even after it scrolled out)."""

    max_lines: int
    lines: deque[str] = field(init=False)
    total: int = 0
    first_error: int | None = None  # absolute line number (0-based)
    first_error_text: str = ""

    def __post_init__(self) -> None:
        self.lines = deque(maxlen=self.max_lines)

    def extend(self, new: list[str]) -> None:
        if self.first_error is None and new:
            joined = "\n".join(new)  # one regex pass per batch, not one call per line
            match = ERROR_LINE.search(joined) if any(k in joined for k in ERROR_HINTS) else None
            if match:
                offset = joined.count("\n", 0, match.start())
                self.first_error, self.first_error_text = self.total + offset, new[offset]
        self.lines.extend(new)
        self.total += len(new)

    @property
    def dropped(self) -> int:
        return self.total - len(self.lines)

    def find(self, needle: str, after: int = -1) -> int | None:
        """Index (in the kept tail) of the next line containing `needle`, wrapping around."""
        lowered = needle.lower()
        kept = list(self.lines)
        order = list(range(after + 1, len(kept))) + list(range(0, min(after + 1, len(kept))))
        for index in order:
            if lowered in kept[index].lower():
                return index
        return None


@dataclass
class PreparedLines:
    """A batch already split per tab and prefixed for the merged view, so the event loop only
    appends: built in the watching thread (`prepare_lines`), never per line on the loop."""

    merged: list[str]
    per_tab: dict[str, list[str]]


def prepare_lines(batch: list[tuple[int | None, str, str]]) -> PreparedLines:
    per_tab: dict[str, list[str]] = {}
    merged = []
    for rank, _stream, text in batch:
        merged.append(prefix(rank) + text)
        per_tab.setdefault(tab_id(rank), []).append(text)
    return PreparedLines(merged, per_tab)


class RankHighlighter(Highlighter):
    """Colours the `rN│` prefix by rank and error lines red; the text itself stays plain."""

    def highlight(self, text: Text) -> None:
        plain = text.plain
        match = re.match(r"(r(\d+)|tr)│ ", plain)
        if match:
            colour = "dim" if match.group(2) is None else RANK_COLOURS[int(match.group(2)) % len(RANK_COLOURS)]
            text.stylize(f"bold {colour}", 0, match.end())
        if ERROR_LINE.search(plain):
            text.stylize("red", match.end() if match else 0)


class RankLogs(Vertical):
    """Tabs (all, rank 0…N-1, torchrun) over one bounded `Log`; search and first-error jumps."""

    DEFAULT_CSS = """
    RankLogs { height: 1fr; }
    RankLogs Tabs { height: 2; }
    RankLogs FollowLog { height: 1fr; }
    RankLogs #log-paused { display: none; height: 1; background: $warning 30%; }
    RankLogs.-paused #log-paused { display: block; }
    RankLogs #log-search { display: none; height: 3; }
    RankLogs.-searching #log-search { display: block; }
    """

    def __init__(self, max_lines: int = 2000, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.max_lines = max_lines
        self.buffers: dict[str, LogBuffer] = {MERGED: LogBuffer(max_lines)}
        self.search_text = ""
        self._match: int | None = None

    def compose(self) -> ComposeResult:
        yield Tabs(Tab(_("all"), id=MERGED), id="log-tabs")
        log = FollowLog(max_lines=self.max_lines, highlight=True, id="rank-log")
        log.highlighter = RankHighlighter()
        yield log
        yield Static(_("paused: new lines are kept but not shown — p or End follows the log again"), id="log-paused")
        yield Input(placeholder=_("search this tab (enter: find, escape: close)"), id="log-search")

    @property
    def log_view(self) -> FollowLog:
        return self.query_one("#rank-log", FollowLog)

    @property
    def active(self) -> str:
        return self.query_one(Tabs).active or MERGED

    def reset(self) -> None:
        self.buffers = {MERGED: LogBuffer(self.max_lines)}
        tabs = self.query_one(Tabs)
        for tab in list(tabs.query(Tab)):
            if tab.id != MERGED:
                tabs.remove_tab(tab)
        tabs.active = MERGED
        self.log_view.clear()
        self.log_view.auto_scroll = True

    def ensure_tabs(self, ranks: Iterable[int | None]) -> None:
        tabs = self.query_one(Tabs)
        for rank in sorted(ranks, key=lambda r: -1 if r is None else r):
            key = tab_id(rank)
            if key not in self.buffers:
                self.buffers[key] = LogBuffer(self.max_lines)
                label = TORCHRUN if rank is None else f"rank {rank}"
                before = None if rank is None or TORCHRUN not in self.buffers else TORCHRUN
                tabs.add_tab(Tab(label, id=key), before=before)

    def add_lines(self, batch: list[tuple[int | None, str, str]], prepared: PreparedLines | None = None) -> None:
        """Append a batch of already neutralised (rank, stream, text) lines (split already, if `prepared`)."""
        if not batch:
            return
        prepared = prepared or prepare_lines(batch)
        merged, per_tab = prepared.merged, prepared.per_tab
        missing = [key for key in per_tab if key not in self.buffers]
        if missing:
            self.ensure_tabs(None if key == TORCHRUN else int(key.removeprefix("rank")) for key in missing)
        self.buffers[MERGED].extend(merged)
        for key, lines in per_tab.items():
            self.buffers[key].extend(lines)
        shown = merged if self.active == MERGED else per_tab.get(self.active, [])
        if shown:
            self.log_view.write_lines(shown[-self.max_lines:])

    def on_tabs_tab_activated(self, event: Tabs.TabActivated) -> None:
        event.stop()
        self.show_tab()

    def show_tab(self) -> None:
        buffer = self.buffers.get(self.active)
        log = self.log_view
        log.clear()
        if buffer and buffer.lines:
            log.write_lines(list(buffer.lines), scroll_end=log.auto_scroll)
        self._match = None

    # follow / pause, search, first error
    def on_follow_log_follow_changed(self, event: FollowLog.FollowChanged) -> None:
        event.stop()
        self.set_class(not event.following, "-paused")

    def toggle_follow(self) -> bool:
        log = self.log_view
        log.auto_scroll = not log.auto_scroll
        if log.auto_scroll:
            log.scroll_end(animate=False)
        return log.auto_scroll

    def _jump(self, index: int) -> None:
        log = self.log_view
        log.auto_scroll = False
        log.scroll_to(y=max(0, log.row_of(index) - 2), animate=False)

    def open_search(self) -> None:
        self.add_class("-searching")
        self.query_one("#log-search", Input).focus()

    def on_key(self, event: object) -> None:
        if getattr(event, "key", "") == "escape" and self.has_class("-searching"):
            event.stop()  # type: ignore[attr-defined]
            self.remove_class("-searching")
            self.log_view.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id != "log-search":
            return
        event.stop()
        self.search_text = event.value.strip()
        self._match = None
        self.find_next()
        self.remove_class("-searching")
        self.log_view.focus()

    def find_next(self) -> str:
        """Scroll to the next match of the search text; says what happened."""
        buffer = self.buffers.get(self.active)
        if not self.search_text or buffer is None:
            return _("nothing to search for: press / first")
        found = buffer.find(self.search_text, -1 if self._match is None else self._match)
        if found is None:
            return _("{text} is not in the last {count} lines of this tab").format(text=repr(self.search_text),
                                                                                    count=len(buffer.lines))
        self._match = found
        self._jump(found)
        return _("{text}: line {line}").format(text=repr(self.search_text), line=buffer.dropped + found + 1)

    def first_error(self) -> str:
        buffer = self.buffers.get(self.active)
        if buffer is None or buffer.first_error is None:
            return _("no error line in this tab yet")
        index = buffer.first_error - buffer.dropped
        if index < 0:
            return _("the first error (line {line}) has scrolled out of the on-screen tail; press f for the full "
                     "log: {text}").format(line=buffer.first_error + 1, text=buffer.first_error_text[:80])
        self._jump(index)
        return _("first error at line {line}").format(line=buffer.first_error + 1)
