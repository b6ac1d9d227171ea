"""Read any log a distributed job leaves, line by line, in bounded memory, and say which rank wrote each line.

A log may be one rank's file, torchrun's own output, or one file with every rank interleaved and
prefixed `[rank1]:`, `[default1]:`, `[default1]:[rank1]:` (torchrun --tee) or `[rank 1] ` (mgtutor run).
Bytes may be anything: invalid UTF-8 is replaced, terminal escapes are removed, and a line longer
than CHUNK is handed out in pieces with the same line number, so a 200 MB file with no newline
never sits in memory whole.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from mgtutor.training.foundation.safe_io import open_regular

CHUNK = 1 << 20  # longest piece of a line handed out at once
EVIDENCE_CHARS = 400  # evidence lines are cut to this for display

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
# [rank1]:  [rank 1]  [default1]:  [trainer3]:  (stacked: [default1]:[rank1]:)
_PREFIX = re.compile(r"\[(?:rank ?(\d+)\]:? ?|[A-Za-z_]+?(\d+)\]: ?)")
_TORCHRUN_PREFIX = "[torchrun] "
_FILE_RANK = re.compile(r"rank[_-]?(\d+)(?:\.(stdout|stderr))?(?:\.log)?$")


@dataclass(frozen=True)
class LogLine:
    file: str
    line: int
    rank: int | None
    text: str  # without the rank prefix, escapes removed

    def evidence(self) -> dict[str, object]:
        text = self.text if len(self.text) <= EVIDENCE_CHARS else self.text[:EVIDENCE_CHARS] + "…"
        return {"file": self.file, "line": self.line, "text": text}


def clean(text: str) -> str:
    """Remove terminal control sequences: rank output must not drive the user's terminal."""
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    return _CONTROL.sub("", text)


def split_prefix(text: str) -> tuple[int | None, str]:
    """(rank named by the line's prefixes, the rest of the line)."""
    rank: int | None = None
    if text.startswith(_TORCHRUN_PREFIX):
        return None, text[len(_TORCHRUN_PREFIX):]
    pos = 0
    while True:
        match = _PREFIX.match(text, pos)
        if not match:
            break
        rank = int(match.group(1) or match.group(2))
        pos = match.end()
    return rank, text[pos:]


def rank_of_file(path: str | Path) -> int | None:
    """rank<R>.stdout.log and the like carry their rank in the name."""
    match = _FILE_RANK.search(Path(path).name)
    return int(match.group(1)) if match else None


def raw_lines(handle: BinaryIO, chunk: int = CHUNK) -> Iterator[tuple[int, bytes]]:
    """(line number, bytes) with the line ending removed; over-long lines come in pieces."""
    lineno = 0
    continuing = False
    while True:
        piece = handle.readline(chunk)
        if not piece:
            return
        if not continuing:
            lineno += 1
        continuing = not piece.endswith(b"\n")
        yield lineno, piece.rstrip(b"\r\n")


def lines_of(data: bytes, name: str, lineno: int, default_rank: int | None = None) -> Iterator[LogLine]:
    """One raw line (no line ending) as LogLines; `\\r` redraws (progress bars) become separate pieces."""
    text = data.decode("utf-8", "replace")
    for part in text.split("\r") if "\r" in text else (text,):
        part = clean(part)
        if not part.strip():
            continue
        rank, rest = split_prefix(part)
        yield LogLine(name, lineno, rank if rank is not None else default_rank, rest)


def read_log(handle: BinaryIO, name: str, default_rank: int | None = None) -> Iterator[LogLine]:
    """Every line of one log as LogLine."""
    for lineno, data in raw_lines(handle):
        yield from lines_of(data, name, lineno, default_rank)


def read_log_file(path: str | Path, default_rank: int | None = None, name: str | None = None) -> Iterator[LogLine]:
    """Lines of a file on disk; raises OSError only when it cannot be opened."""
    handle = open_regular(path)
    with handle:
        yield from read_log(handle, name or str(path), default_rank)


def read_text(text: str | bytes, name: str = "<text>", default_rank: int | None = None) -> Iterable[LogLine]:
    import io

    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    return list(read_log(io.BytesIO(data), name, default_rank))
