"""The ranks' lines as a person reads them: a traceback that several ranks print the same is shown once,
under every rank that printed it, and torch's own `[rankN]:` prefix is dropped where a view adds its own.

    fold = TracebackFold()
    for ranks, stream, text in fold.feed(update.lines): ...   # ranks: (0,), (0, 1) for a shared traceback,
    for ranks, stream, text in fold.flush(): ...              # or None for torchrun's own lines
    fold.exception(rank)                                      # the last exception line a rank printed

Two ranks that fail the same way print the same 20-line traceback each, at nearly the same moment. A
rank's traceback (with its chained ones) is held from "Traceback (most recent call last):" until no
rank has printed a traceback line for HOLD_S, so the others' copies can join it; the lines that rank
prints meanwhile wait behind it (its own order is kept), every other rank's lines pass at once. A
copy that comes after its first was shown is one line naming the rank that showed it. Nothing is held
longer than MAX_HOLD_S. Headless and torch-free.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from mgtutor.training.foundation.i18n import ngettext
from mgtutor.training.runs.follow.detectors import tail_lines
from mgtutor.training.runs.follow.tail import LineTuple
from mgtutor.training.runs.records.record import RunRecord

HOLD_S = 0.5  # quiet time after a traceback line before the held tracebacks are shown
MAX_HOLD_S = 3.0  # nothing waits longer (a rank that stopped mid-traceback)
MAX_LINES = 400  # a longer traceback is shown as it is
TRACEBACK = "Traceback (most recent call last):"
CHAINED = ("During handling of the above exception, another exception occurred:",
           "The above exception was the direct cause of the following exception:")
TORCH_PREFIX = re.compile(r"\[rank(\d+)\]: ?")

FoldedLine = tuple[tuple[int, ...] | None, str, str]  # (ranks, stream, text); ranks None: torchrun


def own_text(rank: int | None, text: str) -> str:
    """The line without torch's `[rankN]:` prefix of the rank that printed it (our view names the rank)."""
    match = TORCH_PREFIX.match(text) if rank is not None and text.startswith("[rank") else None
    return text[match.end():] if match and int(match.group(1)) == rank else text


@dataclass
class _Traceback:
    """One rank's traceback, its chained ones, and the exception line that ends it."""
    stream: str
    lines: list[str]
    began: float
    state: str = "frames"  # frames → exception → (chained → frames …)
    tail: list[str] = field(default_factory=list)  # blank lines after the exception: its own, or the next's

    @property
    def growing(self) -> bool:
        return self.state != "exception"

    def take(self, text: str) -> bool:
        """Whether `text` belongs to this traceback; False ends it (then `tail` holds lines to show after)."""
        if len(self.lines) >= MAX_LINES:
            return False
        if self.state == "frames":
            self.lines.append(text)
            if text.strip() and not text[:1].isspace() and text != TRACEBACK:
                self.state = "exception"
            return True
        if self.state == "exception":
            if not text.strip():
                self.tail.append(text)
            elif text[:1].isspace() or text in CHAINED:  # the message's own lines, or a chained traceback
                self.lines += self.tail + [text]
                self.tail = []
                self.state = "chained" if text in CHAINED else "exception"
            else:
                return False
            return True
        if text.strip() and text != TRACEBACK:
            return False
        self.lines.append(text)
        self.state = "frames" if text == TRACEBACK else "chained"
        return True

    @property
    def exception(self) -> str:
        return next((line for line in reversed(self.lines) if line.strip() and not line[:1].isspace()), "")


class TracebackFold:
    """Rank lines in (LineTuple), FoldedLine out; see the module's docstring."""

    def __init__(self) -> None:
        self.held: dict[int, list[_Traceback | tuple[str, str]]] = {}  # rank → its traceback, and what came after
        self.shown: dict[tuple[str, ...], tuple[int, ...]] = {}  # a traceback's lines → the ranks it was shown for
        self.open: dict[tuple[int, str], _Traceback] = {}  # a traceback still being printed, by rank and stream
        self.exceptions: dict[int, str] = {}
        self._last = 0.0

    def exception(self, rank: int) -> str | None:
        """The exception line of the last traceback `rank` printed (None: it printed none)."""
        return self.exceptions.get(rank)

    def feed(self, lines: list[LineTuple], now: float) -> list[FoldedLine]:
        out: list[FoldedLine] = []
        for rank, stream, raw in lines:
            text = own_text(rank, raw)
            if rank is None:
                out.append((None, stream, text))
            elif rank in self.held or text == TRACEBACK:
                self._hold(rank, stream, text, now)
            else:
                out.append(((rank,), stream, text))
        if self.held and self._settled(now):
            out += self.flush()
        return out

    def _hold(self, rank: int, stream: str, text: str, now: float) -> None:
        queue = self.held.setdefault(rank, [])
        current = self.open.get((rank, stream))
        if current is not None:
            if current.take(text):
                self._last = now
                return
            del self.open[(rank, stream)]
            queue += [(stream, line) for line in current.tail]
            current.tail = []
        if text == TRACEBACK:
            self.open[(rank, stream)] = current = _Traceback(stream, [text], now)
            queue.append(current)
            self._last = now
        else:
            queue.append((stream, text))

    def _settled(self, now: float) -> bool:
        if any(now - t.began >= MAX_HOLD_S for queue in self.held.values() for t in queue if isinstance(t, _Traceback)):
            return True
        return now - self._last >= HOLD_S and not any(t.growing for t in self.open.values())

    def flush(self) -> list[FoldedLine]:
        """Everything held, each traceback once under every rank that printed it (the end of a run, or
        HOLD_S after the last traceback line)."""
        same: dict[tuple[str, ...], dict[int, None]] = {}
        for rank, queue in sorted(self.held.items()):
            for item in queue:
                if isinstance(item, _Traceback):
                    same.setdefault(tuple(item.lines), {})[rank] = None
                    self.exceptions[rank] = item.exception
        out: list[FoldedLine] = []
        shown_now: set[tuple[str, ...]] = set()
        for rank, queue in sorted(self.held.items()):
            for item in queue:
                if not isinstance(item, _Traceback):
                    out.append(((rank,), *item))
                    continue
                out += self._shown_once(rank, item, tuple(same[tuple(item.lines)]), shown_now)
                out += [((rank,), item.stream, line) for line in item.tail]
        self.held, self.open = {}, {}
        return out

    def _shown_once(self, rank: int, item: _Traceback, ranks: tuple[int, ...],
                    shown_now: set[tuple[str, ...]]) -> list[FoldedLine]:
        key = tuple(item.lines)
        if key in shown_now:
            return []  # shown a moment ago in this flush, under this rank among others
        shown_now.add(key)
        earlier = self.shown.get(key)
        if earlier is not None and earlier != ranks:
            said = ngettext("(the same traceback as rank {ranks}, above)", "(the same traceback as ranks {ranks}, above)",
                            len(earlier)).format(ranks=", ".join(map(str, earlier)))
            return [(ranks, item.stream, said)]
        self.shown[key] = ranks
        return [(ranks, item.stream, line) for line in item.lines]


def last_exception(record: RunRecord, rank: int) -> str | None:
    """The exception line of the last traceback in a rank's stderr (its last 64 KiB), or None."""
    fold = TracebackFold()
    fold.feed([(rank, "stderr", line) for line in tail_lines(record.rank_log(rank, "stderr"), 1000, 1 << 16)], 0.0)
    fold.flush()
    return fold.exception(rank)
