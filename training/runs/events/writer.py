"""The one event protocol every mgtutor worker speaks: JSON lines in `<run dir>/events.jsonl`.

Each event is one JSON object on one line with at least `rank`, `t` (unix seconds) and `type`.
Workers find the file through the `MGTUTOR_EVENTS` environment variable, which the launcher sets;
without it (a plain `torchrun` outside mgtutor) `emit` does nothing, so workers run anywhere.

Reading goes through `EventReader` (training/runs/events/reader.py); what each type carries is
its dataclass in training/runs/events/types.py.
"""
from __future__ import annotations

import json
import math
import os
import time
from typing import Any

from mgtutor.training.runs.events.reader import EventReader, parse_event, read_events
from mgtutor.training.runs.events.types import (
    AllReduceRow,
    BenchResultEvent,
    BenchRowsEvent,
    CheckpointEvent,
    EpochEvent,
    ErrorEvent,
    Event,
    EventType,
    RendezvousEvent,
    ResultEvent,
    StartEvent,
    StepEvent,
)

EVENTS_ENV = "MGTUTOR_EVENTS"
EVENT_TYPES = tuple(kind.value for kind in EventType)

__all__ = ["EVENTS_ENV", "EVENT_TYPES", "AllReduceRow", "BenchResultEvent", "BenchRowsEvent", "CheckpointEvent",
           "EpochEvent", "ErrorEvent", "Event", "EventReader", "EventType", "EventWriter", "RendezvousEvent",
           "ResultEvent", "StartEvent", "StepEvent", "encode", "parse_event", "read_events"]


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
        self.dropped = 0  # events a full disk (or another write error) lost
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600) if path else None

    @classmethod
    def from_env(cls, rank: int) -> EventWriter:
        return cls(os.environ.get(EVENTS_ENV) or None, rank)

    def emit(self, event_type: str, **fields: Any) -> None:
        if self._fd is not None:
            try:
                os.write(self._fd, encode(event_type, self.rank, **fields))
            except OSError:  # a full disk loses the event, never the training
                self.dropped += 1

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
