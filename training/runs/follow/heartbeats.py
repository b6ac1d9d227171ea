"""Who is watching a run: a heartbeat file per follower, so `mgtutor runs` can say "running, detached".

    <run dir>/watchers/<pid>-<n>.json   {"pid", "host", "what", "since", "t"}

Every RunSession that follows a live run (the CLI's `mgtutor run`/`train`/`runs attach`, the TUI's
Monitor, …) rewrites its file every HEARTBEAT_S and removes it when it ends or detaches. A file
whose process is gone, or that was not rewritten for STALE_S, counts for nothing: a follower
killed with SIGKILL leaves a file that goes stale on its own. The stale window is wide because a
follower may be busy for seconds at a time (taking every rank's stack).
"""
from __future__ import annotations

import itertools
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mgtutor.training.runs.records.record import RunRecord, pid_alive, read_json, write_json_atomic

HEARTBEAT_S = 2.0
STALE_S = 20.0
_numbers = itertools.count(1)


def watchers_dir(record: RunRecord) -> Path:
    return record.path / "watchers"


@dataclass(frozen=True)
class Watcher:
    pid: int
    host: str
    what: str  # "mgtutor run", "Monitor", …
    since: float
    t: float  # the last heartbeat


class Heartbeat:
    """One follower's heartbeat file. `beat()` is cheap to call often: it writes every HEARTBEAT_S."""

    def __init__(self, record: RunRecord, what: str) -> None:
        self.record, self.what = record, what
        self.path = watchers_dir(record) / f"{os.getpid()}-{next(_numbers)}.json"
        self.since = time.time()
        self._next = 0.0

    def beat(self) -> None:
        now = time.monotonic()
        if now < self._next:
            return
        self._next = now + HEARTBEAT_S
        try:
            self.path.parent.mkdir(mode=0o700, exist_ok=True)
            write_json_atomic(self.path, {"pid": os.getpid(), "host": socket.gethostname(), "what": self.what,
                                          "since": self.since, "t": time.time()})
        except OSError:
            pass  # a read-only or vanished run dir: the run's output matters more than the heartbeat

    def stop(self) -> None:
        """Remove the file (the next `beat()` would write it again)."""
        self._next = 0.0
        try:
            self.path.unlink()
        except OSError:
            pass


def live_watchers(record: RunRecord, now: float | None = None) -> list[Watcher]:
    """The followers whose heartbeat is fresh and whose process (on this host) still lives."""
    now = time.time() if now is None else now
    host = socket.gethostname()
    found = []
    try:
        paths = sorted(watchers_dir(record).glob("*.json"))
    except OSError:
        return []
    for path in paths:
        watcher = _parse(read_json(path))
        if watcher is None or now - watcher.t > STALE_S:
            continue
        if watcher.host == host and not pid_alive(watcher.pid):
            continue
        found.append(watcher)
    return found


def _parse(data: Any) -> Watcher | None:
    if not isinstance(data, dict):
        return None
    try:
        return Watcher(pid=int(data["pid"]), host=str(data.get("host", "")), what=str(data.get("what", "")),
                       since=float(data.get("since", 0)), t=float(data["t"]))
    except (KeyError, TypeError, ValueError):
        return None
