"""Each rank's last lines for a report, with its first error marked.

A log may be hundreds of MB: the first error is found by one regex search over the text (C speed),
its line number by counting newlines before it, and only the tail and a few lines around that
error are kept. The first error is often far above the tail (a rank that failed, then printed the
other ranks' timeouts), so it gets its own window.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from mgtutor.diagnostics.report.redact import Redactor
from mgtutor.training.runs.records.record import RunRecord
from mgtutor.training.foundation.safe_io import open_regular

TAIL_LINES = 40
AROUND_ERROR = (3, 12)  # lines before and after the first error, when it is above the tail
MAX_READ = 64 << 20  # bytes of one log read for a report; a bigger one keeps its end
MAX_LINE = 400  # characters shown of one line
# The lines a reader looks for first: a traceback's start, an exception, NCCL's warnings, a fatal signal.
FIRST_ERROR = re.compile(r"Traceback \(most recent call last\)|(?:Error|Exception)[:!]|NCCL WARN|FATAL|"
                         r"out of memory|Segmentation fault|SIGKILL|SIGSEGV|ChildFailedError")
NCCL_WARN = "NCCL WARN"


@dataclass
class LogLine:
    number: int  # 1-based line number in the file; 0 for the "… lines left out …" marker
    text: str
    first_error: bool = False


@dataclass
class LogTail:
    rank: int | None  # None: torchrun's own log
    name: str  # logs/rank0.stderr.log
    total: int  # lines in the file
    lines: list[LogLine] = field(default_factory=list)
    first_error: int | None = None  # its line number
    nccl_warn: str | None = None  # the file's first `NCCL WARN` line


def _read(path: Path) -> str:
    with open_regular(path) as handle:  # a FIFO or device in logs/ is refused, never waited on
        handle.seek(0, 2)
        size = handle.tell()
        handle.seek(max(0, size - MAX_READ))
        return handle.read().decode(errors="replace")


def tail_of(path: Path, name: str, rank: int | None, clean: Redactor, tail: int = TAIL_LINES) -> LogTail | None:
    try:
        text = _read(path)
    except OSError:
        return None
    lines = text.splitlines()  # only the lines kept are redacted (a log may be 64 MB)
    match = FIRST_ERROR.search(text)
    first = text.count("\n", 0, match.start()) if match else None  # 0-based index of its line
    keep = list(range(max(0, len(lines) - tail), len(lines)))
    if first is not None and first < len(lines) - tail:
        before, after = AROUND_ERROR
        window = list(range(max(0, first - before), min(len(lines), first + after)))
        keep = window + [i for i in keep if i > window[-1]]
    out: list[LogLine] = []
    for i in keep:
        if out and out[-1].number and i + 1 > out[-1].number + 1:
            out.append(LogLine(0, f"… {i - out[-1].number} line(s) left out …"))
        out.append(LogLine(i + 1, clean.text(lines[i])[:MAX_LINE], first_error=i == first))  # redact, then cut
    warn = line_with(text, NCCL_WARN)
    return LogTail(rank=rank, name=name, total=len(lines), lines=out, first_error=None if first is None else first + 1,
                   nccl_warn=clean.text(warn.strip())[:MAX_LINE] if warn is not None else None)


def line_with(text: str, needle: str) -> str | None:
    """The first line that holds `needle`, in time linear in the text: find the needle, then the line's
    ends around it. (A regex `[^\\n]*NCCL WARN[^\\n]*` retried its `[^\\n]*` from every start position
    of a line: a 300,000-character tqdm line took minutes.)"""
    at = text.find(needle)
    if at < 0:
        return None
    start = text.rfind("\n", 0, at) + 1
    end = text.find("\n", at)
    return text[start:] if end < 0 else text[start:end]


def rank_tails(record: RunRecord, clean: Redactor, tail: int = TAIL_LINES) -> list[LogTail]:
    """Every rank's stderr and stdout (non-empty ones), then torchrun's log."""
    out = []
    for rank, _stream, path in sorted(record.rank_logs(), key=lambda x: (x[0], x[1] != "stderr")):
        got = tail_of(path, f"logs/{path.name}", rank, clean, tail)
        if got is not None and got.total:
            out.append(got)
    launcher = tail_of(record.torchrun_log, "torchrun.log", None, clean, tail)
    if launcher is not None and launcher.total:
        out.append(launcher)
    return out


def first_nccl_warn(logs: list[LogTail]) -> str | None:
    """The first `NCCL WARN` line of any rank (NCCL's template asks for it), with the file it is in."""
    return next((f"{log.name}: {log.nccl_warn}" for log in logs if log.nccl_warn), None)
