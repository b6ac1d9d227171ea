"""One pass over log lines: catalogue matches, each rank's first exception, and torchrun's exit report.

Only the first few hits per kind are kept, so memory does not grow with the log.
"""
from __future__ import annotations

import re
import signal as _signal
from dataclasses import dataclass
from typing import Any

from mgtutor.diagnostics.failures.catalogue import KindSpec, Pattern
from mgtutor.diagnostics.failures.logparse import LogLine

MAX_HITS = 12
MATCH_CHARS = 8192
_AGENT_FAILED = re.compile(r"failed \(exitcode: (-?\d+)\) local_rank: (\d+) \(pid: (\d+)\)")
_BLOCK_RANK = re.compile(r"^\s*rank\s*:\s*(\d+) \(local_rank: \d+\)")
_BLOCK_EXIT = re.compile(r"^\s*exitcode\s*:\s*(-?\d+) \(pid: \d+\)\s*(?:\((SIG\w+)\))?")
_BLOCK_SIGNAL = re.compile(r"traceback\s*:\s*Signal (\d+) \((SIG\w+)\) received by PID")
_EXCEPTION = re.compile(r"^[A-Za-z_][\w.]*(?::|$)")
_NOT_ROOT = ("ChildFailedError", "KeyboardInterrupt", "SystemExit")


@dataclass(frozen=True)
class Hit:
    line: LogLine
    groups: dict[str, str | None]
    rank: int | None
    order: int
    evidence_only: bool
    summary: str | None = None


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
        self._in_traceback: dict[tuple[str, int | None], bool] = {}
        self._block_rank: int | None = None
        self._in_root = False
        self._patterns: list[tuple[str, Pattern]] = [(s.kind, p) for s in catalogue.values() for p in s.patterns]

    def feed(self, line: LogLine) -> None:
        self._order += 1
        if line.rank is not None and 0 <= line.rank < 1 << 20:
            self.seen_ranks.add(line.rank)
        text = line.text
        self._track_traceback(line)
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
                            pattern.evidence_only, pattern.summary))

    def _track_traceback(self, line: LogLine) -> None:
        key = (line.file, line.rank)
        text = line.text
        if text.startswith("Traceback (most recent call last)"):
            self._in_traceback[key] = True
            return
        if not self._in_traceback.get(key):
            return
        if text[:1] in (" ", "\t", "^", "~") or not text.strip():
            return
        self._in_traceback[key] = False
        if _EXCEPTION.match(text) and not any(word in text for word in _NOT_ROOT):
            if len(self.exceptions) < 1024:
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
                how = f"signal {entry['signal']}" if entry.get("signal") else f"exit code {entry.get('exit_code')}"
                merged["evidence"] = [{"file": f"ranks/rank{rank}.json", "line": 1, "text": f"rank {rank} ended with {how}"}]
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
