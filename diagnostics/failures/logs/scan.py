"""One pass over log lines: catalogue matches, each rank's first exception and first fatal-error dump
(fatal_error.py), and torchrun's exit report.

Only the first few hits per kind are kept, so memory does not grow with the log. blockscan.py feeds
the scanner only the lines its prefilter (`Scanner.prefilter`) points at, and every line while
`wants_every_line` (an open traceback whose exception line is still to come, or a fatal-error dump
still being read).
"""
from __future__ import annotations

import re
import signal as _signal
from dataclasses import dataclass
from typing import Any

from mgtutor.diagnostics.failures.catalogue import KindSpec, Pattern
from mgtutor.diagnostics.failures.fatal_error import FATAL_TRIGGERS, FatalDumps
from mgtutor.diagnostics.failures.logs.logparse import LogLine
from mgtutor.diagnostics.failures.logs.prefilter import Prefilter
from mgtutor.diagnostics.failures.samedata import SAME_DATA_TRIGGERS, SameData
from mgtutor.training.foundation.i18n import _

MAX_HITS = 12
MATCH_CHARS = 8192
_AGENT_FAILED = re.compile(r"failed \(exitcode: (-?\d+)\) local_rank: (\d+) \(pid: (\d+)\)")
_BLOCK_RANK = re.compile(r"^\s*rank\s*:\s*(\d+) \(local_rank: \d+\)")
_BLOCK_EXIT = re.compile(r"^\s*exitcode\s*:\s*(-?\d+) \(pid: \d+\)\s*(?:\((SIG\w+)\))?")
_BLOCK_SIGNAL = re.compile(r"traceback\s*:\s*Signal (\d+) \((SIG\w+)\) received by PID")
_EXCEPTION = re.compile(r"^[A-Za-z_][\w.]*(?::|$)")
_NOT_ROOT = ("ChildFailedError", "KeyboardInterrupt", "SystemExit")
_TRACEBACK = "Traceback (most recent call last)"
# what _track_traceback and _track_exits look at, lowercased: the prefilter must hand these lines over
SCANNER_TRIGGERS = ("traceback (most recent call last)", "exitcode", "root cause", "local_rank",
                    "received by pid", "=" * 20)
MAX_EXCEPTIONS = 1024
MAX_OPEN_TRACEBACKS = 64  # tracebacks being read at once (ranks interleaved); each open one makes every line read
TRACEBACK_LINES = 20_000  # a traceback still open after this many lines is given up (its rank died mid-way)
_PREFILTERS: dict[int, tuple[dict[str, KindSpec], Prefilter]] = {}


def prefilter_for(catalogue: dict[str, KindSpec]) -> Prefilter:
    """One Prefilter per catalogue object (building the trie regex costs a few milliseconds)."""
    cached = _PREFILTERS.get(id(catalogue))
    if cached is None or cached[0] is not catalogue:
        patterns = [p for spec in catalogue.values() for p in spec.patterns]
        literals = [t for p in patterns for t in p.triggers]
        literals += [*SCANNER_TRIGGERS, *SAME_DATA_TRIGGERS, *FATAL_TRIGGERS]
        cached = (catalogue, Prefilter(literals, [r for p in patterns for r in p.trigger_res]))
        _PREFILTERS[id(catalogue)] = cached
    return cached[1]


@dataclass(frozen=True)
class Hit:
    line: LogLine
    groups: dict[str, str | None]
    rank: int | None
    order: int
    evidence_only: bool
    summary: str | None = None
    fix: str | None = None


def signal_name(code: int) -> str | None:
    try:
        return _signal.Signals(-code).name if code < 0 else None
    except ValueError:
        return f"signal {-code}"


class Scanner:
    def __init__(self, catalogue: dict[str, KindSpec]) -> None:
        self.catalogue = catalogue
        self.hits: dict[str, list[Hit]] = {}
        self.seen_ranks: set[int] = set()
        self.exceptions: dict[int | None, LogLine] = {}
        self.log_exits: dict[int, dict[str, Any]] = {}
        self.log_root: int | None = None
        self.agent_first: int | None = None
        self._order = 0
        self._open_tracebacks: dict[tuple[str, int | None], int] = {}  # (file, rank) -> order it opened at
        self._block_rank: int | None = None
        self._in_root = False
        self._patterns: list[tuple[str, Pattern]] = [(s.kind, p) for s in catalogue.values() for p in s.patterns]
        self.prefilter = prefilter_for(catalogue)
        self.same_data = SameData()
        self.fatal = FatalDumps()

    @property
    def wants_every_line(self) -> bool:
        return bool(self._open_tracebacks) or self.fatal.open

    def note_rank(self, rank: int | None) -> None:
        if rank is not None and 0 <= rank < 1 << 20:
            self.seen_ranks.add(rank)

    def feed(self, line: LogLine) -> None:
        self._order += 1
        self.note_rank(line.rank)
        text = line.text
        self._track_traceback(line)
        self.fatal.feed(line)
        if line.rank is not None and (found := self.same_data.feed(line)):
            self._same_data_hits(found)
        if "exitcode" in text or "Root Cause" in text or "rank" in text or "Signal" in text or text.startswith("="):
            self._track_exits(line)
        text = text[:MATCH_CHARS]  # messages sit at the start of a line; keeps the cost linear in the file size
        low = text.lower()
        for kind, pattern in self._patterns:
            if pattern.needle is not None and pattern.needle not in low:
                continue
            match = pattern.regex.search(text)
            if match is None:
                continue
            hits = self.hits.setdefault(kind, [])
            if len(hits) >= MAX_HITS:
                continue
            groups = match.groupdict()
            rank = _as_int(groups.get("rank"))
            hits.append(Hit(line, groups, rank if rank is not None else line.rank, self._order,
                            pattern.evidence_only, pattern.summary, pattern.fix))

    def _same_data_hits(self, found: tuple[LogLine, LogLine, str]) -> None:
        """Two ranks printed the same batch: the missing-sampler finding, both lines as its evidence."""
        first, second, how = found
        hits = self.hits.setdefault("no_distributed_sampler", [])
        if len(hits) >= MAX_HITS:
            return
        for line in (first, second):
            hits.append(Hit(line, {"how_text": how}, line.rank, self._order, False))

    def _track_traceback(self, line: LogLine) -> None:
        """Each rank's first exception: the first unindented line after its first real traceback."""
        key = (line.file, line.rank)
        text = line.text
        if text.startswith(_TRACEBACK):
            if (line.rank not in self.exceptions and len(self.exceptions) < MAX_EXCEPTIONS
                    and len(self._open_tracebacks) < MAX_OPEN_TRACEBACKS):
                self._open_tracebacks[key] = self._order
            return
        if not self._open_tracebacks:
            return
        for other, opened in list(self._open_tracebacks.items()):
            if self._order - opened > TRACEBACK_LINES:
                del self._open_tracebacks[other]
        if key not in self._open_tracebacks or text[:1] in (" ", "\t", "^", "~") or not text.strip():
            return
        del self._open_tracebacks[key]
        if _EXCEPTION.match(text) and not any(word in text for word in _NOT_ROOT):
            self.exceptions.setdefault(line.rank, line)

    def _track_exits(self, line: LogLine) -> None:
        text = line.text
        if match := _AGENT_FAILED.search(text):
            rank, code = int(match.group(2)), int(match.group(1))
            self._note_exit(rank, code, signal_name(code), line)
            if self.agent_first is None:
                self.agent_first = rank
        elif "Root Cause (first observed failure)" in text:
            self._in_root = True
        elif match := _BLOCK_RANK.match(text):
            self._block_rank = int(match.group(1))
        elif (match := _BLOCK_EXIT.match(text)) and self._block_rank is not None:
            code = int(match.group(1))
            self._note_exit(self._block_rank, code, match.group(2) or signal_name(code), line)
            if self._in_root and self.log_root is None:
                self.log_root = self._block_rank
        elif (match := _BLOCK_SIGNAL.search(text)) and self._block_rank is not None:
            self._note_exit(self._block_rank, -int(match.group(1)), match.group(2), line)
        elif text.startswith("=" * 20):
            self._in_root = False
            self._block_rank = None

    def _note_exit(self, rank: int, code: int, signal: str | None, line: LogLine) -> None:
        entry = self.log_exits.setdefault(rank, {"rank": rank, "evidence": []})
        entry["exit_code"] = None if signal and code < 0 else code
        entry["signal"] = signal or entry.get("signal")
        entry["failed"] = code != 0
        if len(entry["evidence"]) < 3:
            entry["evidence"].append(line.evidence())

    def exits_with(self, record_ranks: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
        """Each rank's exit: the run record's rank files win, torchrun's report fills the gaps."""
        exits = {r: dict(e) for r, e in self.log_exits.items()}
        for entry in record_ranks:
            rank = entry.get("rank")
            if not isinstance(rank, int) or (entry.get("exit_code") is None and entry.get("signal") is None):
                continue
            merged = exits.setdefault(rank, {"rank": rank, "evidence": []})
            merged.update(exit_code=entry.get("exit_code"), signal=entry.get("signal"),
                          failed=entry.get("signal") is not None or entry.get("exit_code") not in (0, None))
            if not merged["evidence"]:
                how = (_("signal {signal}").format(signal=entry["signal"]) if entry.get("signal")
                       else _("exit code {code}").format(code=entry.get("exit_code")))
                said = _("rank {rank} ended with {how}").format(rank=rank, how=how)  # the record's words, said here
                merged["evidence"] = [{"file": f"ranks/rank{rank}.json", "line": 1, "text": said}]
        return exits

    def root_rank(self, first_failure: dict[str, Any] | None) -> int | None:
        if first_failure and isinstance(first_failure.get("rank"), int):
            return first_failure["rank"]
        return self.log_root if self.log_root is not None else self.agent_first


def _as_int(value: Any) -> int | None:
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None
