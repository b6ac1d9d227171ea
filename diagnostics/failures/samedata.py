"""A missing DistributedSampler seen in the output: two ranks print the very same batch.

PyTorch says nothing when every rank iterates the whole data set; but scripts often print what a
batch holds (its indices, sample ids, a checksum). With a DistributedSampler those differ between
ranks; without one rank 0 and rank 1 print identical lines. A line counts only when it names the
data (batch, indices, idx, sample ids) and carries a payload that identifies it (a list of numbers,
a hex digest, a float with many digits) — not shapes, sizes, losses or parameters, which are equal
on every rank by design. Rank and device numbers and clock times are removed before comparing.
"""
from __future__ import annotations

import re

from mgtutor.diagnostics.failures.logs.logparse import LogLine
from mgtutor.training.foundation.i18n import _

# a data line names its data with one of these (lowercase; the block prefilter looks for them too)
SAME_DATA_TRIGGERS = ("indices", "_idx", "idx:", "idx=", "idx [", "sample id", "sample_id", "checksum", "first batch",
                      "first_batch", "batch [", "batch[", "batch: [", "batch=[", "batch = [", "batch: tensor",
                      "batch tensor")
_KEYWORD = re.compile("|".join(re.escape(word) for word in SAME_DATA_TRIGGERS))
_PAYLOAD = re.compile(r"(?:tensor\()?\[[-\d\s,.\[\]]{3,}\]|\b0x[0-9a-f]{8,}\b|\b[0-9a-f]{16,}\b|-?\d+\.\d{4,}")
NEAR = 40  # the payload starts within this many characters after the word that names it
_EXCLUDE = re.compile(r"\b(?:shape|size|loss|lr|parameters?|params?|grad|weights?)\b")
_NOISE = re.compile(r"cuda:\d+|\b(?:local_rank|rank|gpu|device|worker)\s*[:=#]?\s*\d+|\d\d:\d\d:\d\d(?:[.,]\d+)?|"
                    r"\d{4}-\d\d-\d\d")
_SPACE = re.compile(r"\s+")
_NUMBER = re.compile(r"\d+")
MAX_KEYS = 10_000
KEY_CHARS = 300


def _identifies(data: str) -> bool:
    """A digest or a long float does; a list needs two numbers at least ([0] is too common to mean anything)."""
    return "[" not in data or len(_NUMBER.findall(data)) >= 2


class SameData:
    """Remembers each rank's data lines; reports a line the first time a second rank prints it too."""

    def __init__(self) -> None:
        self._first: dict[str, LogLine] = {}
        self._reported: set[str] = set()

    def feed(self, line: LogLine) -> tuple[LogLine, LogLine, str] | None:
        low = line.text[:KEY_CHARS * 2].lower()
        word = _KEYWORD.search(low)
        if word is None or _EXCLUDE.search(low):
            return None
        match = _PAYLOAD.search(low, word.start())
        if match is None or match.start() > word.end() + NEAR or not _identifies(match.group()):
            return None
        key = _SPACE.sub(" ", _NOISE.sub("", low)).strip()[:KEY_CHARS]
        first = self._first.get(key)
        if first is None:
            if len(self._first) < MAX_KEYS:
                self._first[key] = line
            return None
        if first.rank == line.rank or key in self._reported:
            return None
        self._reported.add(key)
        data = match.group()
        data = data if len(data) <= 60 else data[:57] + "…"
        return first, line, _(" (ranks {first} and {second} printed the same batch, `{data}`)").format(
            first=first.rank, second=line.rank, data=data)
