"""A live warning for ranks that keep retrying a rendezvous store nobody answers: named within a poll or two
of torch's first `TCP client failed to connect/validate to host H:P - retrying`, not after its 10-30 minute
timeout. The ranks' own children (mp.spawn) write to the rank's log files, so theirs count as the rank's.

A store that is only late (a rank 0 still starting) answers within a try or two: the warning waits for the
TRIES-th retry, a couple of seconds, or a line that says the client gave up.
A Detector (training/runs/follow/detectors.py) that the hang watch polls beside its own look at the stacks.
It reads only what the rank logs gained since its last poll (at most READ_LIMIT bytes of each), and stops
reading once it has spoken: the alert holds until the run ends.
"""
from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mgtutor.diagnostics.failures.store_unreachable import Address, address_in, facts_of, live_text
from mgtutor.training.foundation.safe_io import open_regular
from mgtutor.training.runs.events.types import Event
from mgtutor.training.runs.follow.detectors import Alert
from mgtutor.training.runs.records.record import RunRecord

TRIES = 2  # a store that refused this many tries is no race with a rank 0 still starting
READ_LIMIT = 1 << 18  # bytes of a log's newest growth read per poll: a chatty rank is skipped over, not queued
KIND = "rendezvous_unreachable"


class StoreWatch:
    def __init__(self, record: RunRecord) -> None:
        self.record = record
        self._offsets: dict[Path, int] = {}
        self._partial: dict[Path, bytes] = {}
        self._seen: dict[int, Address] = {}
        self._alert: Alert | None = None
        self._given_up = False

    def observe(self, events: Sequence[Event]) -> None:
        """Events say nothing about a store that never answered."""

    def poll(self, state: Any, now: float) -> list[Alert]:
        if self._alert is None:
            for rank, _stream, path in self.record.rank_logs():
                for line in self._new_lines(path):
                    address = address_in(line)
                    if address is not None:
                        self._seen.setdefault(rank, address)  # every rank that retries is named …
                        self._given_up = self._given_up or _given_up_on(line)  # … once one has for good
            if self._given_up:
                self._alert = self._make()
        return [self._alert] if self._alert is not None else []

    def _new_lines(self, path: Path) -> list[str]:
        try:
            with open_regular(path) as handle:
                size = os.fstat(handle.fileno()).st_size
                start = max(self._offsets.get(path, 0), size - READ_LIMIT)
                handle.seek(start)
                data = handle.read(size - start)
        except OSError:
            return []
        skipped = start > self._offsets.get(path, 0)
        self._offsets[path] = start + len(data)
        data = (b"" if skipped else self._partial.pop(path, b"")) + data
        lines = data.split(b"\n")
        self._partial[path] = lines.pop()
        if skipped and lines:
            lines.pop(0)  # the tail of a line whose head was skipped
        return [line.decode("utf-8", "replace") for line in lines if b"connect" in line]

    def _make(self) -> Alert:
        ranks = sorted(self._seen)
        return Alert(KIND, tuple(ranks), live_text(facts_of(self.record), ranks, self._seen[ranks[0]]))


def _given_up_on(line: str) -> bool:
    """A line that says the store did not answer for good: a timeout, or the TRIES-th retry."""
    tried = re.search(r"- retrying \(try=(\d+)", line)
    return tried is None or int(tried[1]) >= TRIES
