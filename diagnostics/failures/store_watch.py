"""A live warning for ranks that keep retrying a rendezvous store nobody answers: named within a poll or two
of torch's first `TCP client failed to connect/validate to host H:P - retrying`, not after its 10-30 minute
timeout. The ranks' own children (mp.spawn) write to the rank's log files, so theirs count as the rank's.

A store that refuses every connection makes torch retry silently: then the hang watch's confirmed report
(every rank, or its mp.spawn child, still connecting to the store in init_process_group) is passed here
(`saw_hang`), and the warning comes when the script writes the address and nothing accepts a connection there.
A store that is only late (a rank 0 still starting) answers within a try or two: the warning waits for the
TRIES-th retry, a couple of seconds, or a line that says the client gave up.
A Detector (training/runs/follow/detectors.py) that the hang watch polls beside its own look at the stacks.
It reads only what the rank logs gained since its last poll (at most READ_LIMIT bytes of each), and stops
reading once it has spoken: the alert holds until the run ends.
"""
from __future__ import annotations

import os
import re
import socket
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mgtutor.diagnostics.failures.hang.analyse import HangReport
from mgtutor.diagnostics.failures.from_script.store_unreachable import Address, StoreFacts, address_in, facts_of, keep_store, \
    live_text
from mgtutor.training.foundation.safe_io import open_regular
from mgtutor.training.runs.events.types import Event
from mgtutor.training.runs.follow.detectors import Alert
from mgtutor.training.runs.records.record import RunRecord

TRIES = 2  # a store that refused this many tries is no race with a rank 0 still starting
PARTIAL_MAX = 4096  # of a line not finished yet (a progress bar redraws with \r, never \n): torch's are shorter
READ_LIMIT = 1 << 18  # bytes of a log's newest growth read per poll: a chatty rank is skipped over, not queued
KIND = "rendezvous_unreachable"
STORE_PHASE = ("_create_c10d_store", "_env_rendezvous_handler", "_tcp_rendezvous_handler", "rendezvous")


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
        if b"connect" not in data:  # the common case, a run that talks: keep the unfinished line, split nothing
            self._partial[path] = data[data.rfind(b"\n") + 1:][-PARTIAL_MAX:]
            return []
        lines = data.split(b"\n")
        self._partial[path] = lines.pop()[-PARTIAL_MAX:]
        if skipped and lines:
            lines.pop(0)  # the tail of a line whose head was skipped
        return [line.decode("utf-8", "replace") for line in lines if b"connect" in line]

    def saw_hang(self, report: HangReport) -> None:
        """A confirmed hang with every rank (or its mp.spawn child) still connecting to the store, silent because
        the store refuses it: named when the script sets the address and a look there finds no store."""
        wheres = list(report.where.values())
        if self._alert is not None or not wheres or any(
                w.where.category != "init" or w.where.inner not in STORE_PHASE for w in wheres):
            return
        facts = facts_of(self.record)
        address = script_address(facts)
        if address is not None and not answers(address):
            ranks = sorted(report.where)
            self._alert = Alert(KIND, tuple(ranks), live_text(facts, ranks, address))
            keep_store(report, address)

    def _make(self) -> Alert:
        ranks = sorted(self._seen)
        return Alert(KIND, tuple(ranks), live_text(facts_of(self.record), ranks, self._seen[ranks[0]]))


def _given_up_on(line: str) -> bool:
    """A line that says the store did not answer for good: a timeout, or the TRIES-th retry."""
    tried = re.search(r"- retrying \(try=(\d+)", line)
    return tried is None or int(tried[1]) >= TRIES


def script_address(facts: StoreFacts) -> Address | None:
    """The store the script points its ranks at, when it writes both host and port as constants."""
    values = {a.name: str(a.value) for a in facts.settings if a.value is not None}
    if "init_method" in values:
        host, _, port = values["init_method"].removeprefix("tcp://").rpartition(":")
        return Address(host.strip("[]"), port) if port.isdigit() else None
    if values.get("MASTER_PORT", "").isdigit() and values.get("MASTER_ADDR"):
        return Address(values["MASTER_ADDR"], values["MASTER_PORT"])
    return None


def answers(address: Address, timeout: float = 1.0) -> bool:
    """Whether anything accepts a connection there (nothing is sent: a store's protocol is not ours)."""
    try:
        with socket.create_connection((address.host, int(address.port)), timeout=timeout):
            return True
    except OSError:
        return False
