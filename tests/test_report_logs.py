"""The report's log tails stay linear in a line's length (issue 46, item 5): the first `NCCL WARN`
line was found with a regex whose `[^\\n]*` was retried from every start of a line, so a tqdm-style
line of 300,000 characters took minutes (docs/benchmarks.md has the numbers)."""
from __future__ import annotations

from pathlib import Path

import pytest

from mgtutor.diagnostics.report import logs
from mgtutor.diagnostics.report.logs import line_with, tail_of
from mgtutor.diagnostics.report.redact import Redactor

LONG = 300_000


class CountingText(str):
    """A str that counts the characters its find/rfind calls may look at."""
    scanned = 0

    def find(self, sub, start=None, end=None):  # type: ignore[override]
        CountingText.scanned += (len(self) if end is None else end) - (start or 0)
        return str.find(self, sub, start, end)

    def rfind(self, sub, start=None, end=None):  # type: ignore[override]
        CountingText.scanned += (len(self) if end is None else end) - (start or 0)
        return str.rfind(self, sub, start, end)


def test_the_nccl_warn_line_is_found_looking_at_each_character_a_bounded_number_of_times() -> None:
    text = CountingText("\r" * LONG + " NCCL WARN Net : no socket\n" + "tail\n")
    CountingText.scanned = 0
    assert line_with(text, "NCCL WARN") == "\r" * LONG + " NCCL WARN Net : no socket"
    assert CountingText.scanned <= 3 * len(text)  # a whole-text find, then the line's two ends
    assert line_with("no warning here\n", "NCCL WARN") is None
    assert not hasattr(logs.NCCL_WARN, "search")  # no regex scans for it any more


@pytest.mark.timeout(120)  # before: about 3.5 minutes for this file; now milliseconds (no assert on time)
def test_a_300000_character_line_gives_its_tail_and_nccl_warn(tmp_path: Path) -> None:
    log = tmp_path / "rank0.stdout.log"
    log.write_text("epoch 1 " + "#" * LONG + "\n" + "x" * LONG + " NCCL WARN timeout\nlast line\n")
    tail = tail_of(log, "logs/rank0.stdout.log", 0, Redactor(environ={}))
    assert tail is not None and tail.total == 3 and tail.nccl_warn is not None
    assert tail.nccl_warn.startswith("xxx") and len(tail.nccl_warn) == logs.MAX_LINE
    assert [line.text for line in tail.lines][-1] == "last line"
