"""Follow a run directory's log files and hand out whole lines, in order per file.

Lines end at `\\n`, `\\r\\n` or a lone `\\r` (progress bars redraw with `\\r`: each redraw is a
line). Lines of any length are kept whole; a partial last line is held until it ends or `flush`.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from mgtutor.training.runs.records.record import RunRecord
from mgtutor.training.foundation.safe_io import open_regular, path_kind

CHUNK = 1 << 16
DISCOVER_S = 1.0
LineTuple = tuple[int | None, str, str]  # (rank or None for torchrun, stream, text)


@dataclass
class _Follower:
    path: Path
    rank: int | None
    stream: str
    offset: int = 0
    pending: bytes = b""
    pending_cr: bool = field(default=False)

    def read(self, limit: int) -> tuple[list[str], int]:
        """New complete lines, reading at most `limit` bytes; returns (lines, bytes read)."""
        try:
            with open_regular(self.path) as handle:
                handle.seek(self.offset)
                data = handle.read(limit)
        except OSError:  # gone, or unreadable now: nothing new from it
            return [], 0
        self.offset += len(data)
        return self._split(data), len(data)

    def _split(self, data: bytes) -> list[str]:
        if not data:
            return []  # nothing new: a \r at the end of the last read may still be half of a \r\n
        if self.pending_cr and data.startswith(b"\n"):
            data = data[1:]  # the \n of a \r\n split across two reads
        self.pending_cr = False
        buf = self.pending + data
        lines: list[str] = []
        start = 0
        length = len(buf)
        while True:
            nl = buf.find(b"\n", start)
            cr = buf.find(b"\r", start)
            if nl < 0 and cr < 0:
                break
            if cr >= 0 and (nl < 0 or cr < nl):
                lines.append(buf[start:cr].decode("utf-8", "replace"))
                if cr + 1 < length and buf[cr + 1] == 0x0A:
                    start = cr + 2
                else:
                    start = cr + 1
                    if start == length:
                        self.pending_cr = True
            else:
                lines.append(buf[start:nl].decode("utf-8", "replace"))
                start = nl + 1
        self.pending = buf[start:]
        return lines

    def flush(self) -> list[str]:
        rest, self.pending = self.pending, b""
        return [rest.decode("utf-8", "replace")] if rest else []


class RunTail:
    """Polls a run directory; `poll()` returns the lines written since the last call."""

    def __init__(self, record: RunRecord, include_torchrun: bool = True, from_start: bool = True) -> None:
        self.record = record
        self.include_torchrun = include_torchrun
        self._followers: dict[Path, _Follower] = {}
        self._from_start = from_start
        self._next_discover = 0.0
        self._logs_stamp = -1

    def _discover(self, force: bool = False) -> None:
        # Listing the logs folder was most of a poll's cost: list it again when the folder changed, and
        # once a second anyway (a file made in the same clock tick as the last listing keeps its mtime).
        now = time.monotonic()
        stamp = _mtime_ns(self.record.path / "logs")
        if not force and now < self._next_discover and stamp == self._logs_stamp:
            return
        self._next_discover, self._logs_stamp = now + DISCOVER_S, stamp
        found: list[tuple[int | None, str, Path]] = [(r, s, p) for r, s, p in self.record.rank_logs()]
        if self.include_torchrun:
            found.append((None, "torchrun", self.record.torchrun_log))
        for rank, stream, path in found:
            if path not in self._followers and path_kind(path) is None:  # a FIFO or device is never read
                follower = _Follower(path, rank, stream)
                if not self._from_start:
                    follower.offset = path.stat().st_size
                self._followers[path] = follower

    def poll(self, budget: int = 4 * CHUNK, rediscover: bool = False) -> list[LineTuple]:
        """Lines from every file; reads at most `budget` bytes per file per call (back-pressure).
        Files that appeared since are found at most once a second, or now with `rediscover`."""
        self._discover(force=rediscover)
        out: list[LineTuple] = []
        for follower in self._followers.values():
            lines, _ = follower.read(budget)
            out.extend((follower.rank, follower.stream, line) for line in lines)
        return out

    def drain(self) -> list[LineTuple]:
        """Everything left, including partial last lines: call once the writers are gone."""
        out: list[LineTuple] = []
        while True:
            batch = self.poll(budget=1 << 24, rediscover=True)
            out.extend(batch)
            if not batch and all(f.offset >= _size(f.path) for f in self._followers.values()):
                break
        for follower in self._followers.values():
            out.extend((follower.rank, follower.stream, line) for line in follower.flush())
        return out


def _size(path: Path) -> int:
    try:
        return os.stat(path).st_size
    except OSError:  # gone, or in a folder we may not read
        return 0


def _mtime_ns(path: Path) -> int:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:  # gone, or in a folder we may not read
        return 0
