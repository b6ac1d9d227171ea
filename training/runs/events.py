"""The one event protocol every mgtutor worker speaks: JSON lines in `<run dir>/events.jsonl`.

Each event is one JSON object on one line with at least `rank`, `t` (unix seconds) and `type`.
Workers find the file through the `MGTUTOR_EVENTS` environment variable, which the launcher sets;
without it (a plain `torchrun` outside mgtutor) `emit` does nothing, so workers run anywhere.
"""
from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

EVENTS_ENV = "MGTUTOR_EVENTS"
EVENT_TYPES = ("start", "rendezvous", "step", "epoch", "checkpoint", "result", "error")


def _clean(value: Any) -> Any:
    """JSON has no NaN/inf: a NaN loss must still be reported, so it becomes a string."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


def encode(event_type: str, rank: int, **fields: Any) -> bytes:
    if event_type not in EVENT_TYPES:
        raise ValueError(f"unknown event type {event_type!r}; expected one of {EVENT_TYPES}")
    event = {"rank": rank, "t": round(time.time(), 6), "type": event_type}
    event.update({key: _clean(value) for key, value in fields.items()})
    return (json.dumps(event, separators=(",", ":")) + "\n").encode()


class EventWriter:
    """Appends events with one `os.write` per line on an O_APPEND file.

    Ranks share the file; a single small append per event keeps lines whole without locks.
    """

    def __init__(self, path: str | os.PathLike[str] | None, rank: int) -> None:
        self.rank = rank
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600) if path else None

    @classmethod
    def from_env(cls, rank: int) -> EventWriter:
        return cls(os.environ.get(EVENTS_ENV) or None, rank)

    def emit(self, event_type: str, **fields: Any) -> None:
        if self._fd is not None:
            os.write(self._fd, encode(event_type, self.rank, **fields))

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def parse_line(line: str | bytes) -> dict[str, Any] | None:
    """One event from one line, or None for a torn, foreign or malformed line."""
    try:
        event = json.loads(line)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(event, dict) or not {"rank", "t", "type"} <= event.keys():
        return None
    return event


def read_events(path: str | os.PathLike[str]) -> Iterator[dict[str, Any]]:
    """All well-formed events of a file, in file order; a missing file has none."""
    try:
        handle = Path(path).open("rb")
    except FileNotFoundError:
        return
    with handle:
        for line in handle:
            event = parse_line(line)
            if event is not None:
                yield event
