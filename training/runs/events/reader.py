"""The one reader of events.jsonl: incremental (offset + partial line), schema-checked, never raising.

    reader = EventReader(record.events_path)
    for event in reader.poll(): ...          # the whole events written since the last poll
    reader.skipped                           # lines that were not an event of a known schema

A line still being written waits for the next poll. A line that is not JSON, not an object,
of an unknown type, or that breaks its type's schema (training/runs/events/types.py) is counted
in `skipped` and left out: a torn or foreign line never stops a consumer.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from mgtutor.training.foundation.json_decode import DecodeError, decode, parse
from mgtutor.training.foundation.safe_io import open_regular
from mgtutor.training.runs.events.types import BY_KIND, BY_TYPE, Event, EventType

READ_LIMIT = 1 << 22  # bytes per poll: a huge backlog is read over several polls


def event_from_json(data: Any, line: int = 0, source: str = "") -> Event | None:
    """The typed event for one decoded JSON value, or None when it is not a valid event."""
    if not isinstance(data, dict):
        return None
    try:
        kind = EventType(data.get("type"))
    except ValueError:
        return None
    cls = BY_KIND.get((kind, data["kind"])) if isinstance(data.get("kind"), str) else None
    body = {k: v for k, v in data.items() if k not in ("type", "line", "source")}  # what the reader fills
    body["line"], body["source"] = line, source
    try:
        return decode(cls or BY_TYPE[kind], body)
    except DecodeError:
        return None


def parse_event(raw: str | bytes, line: int = 0) -> Event | None:
    """One event from one line of text, or None for a torn, foreign or malformed line (one past
    json_decode's limits too: nested too deep, a 400-digit number, NaN)."""
    try:
        text = raw.decode() if isinstance(raw, bytes) else raw
        data = parse(text)
    except (DecodeError, UnicodeDecodeError):
        return None
    return event_from_json(data, line, text.strip())


class EventReader:
    """New whole events of one events.jsonl since the last poll; a missing file has none yet."""

    def __init__(self, path: str | os.PathLike[str], max_lines: int | None = None) -> None:
        self.path = Path(path)
        self.max_lines = max_lines  # stop reading after this many lines (a runaway file)
        self.offset = 0
        self.lines = 0
        self.skipped = 0
        self._partial = b""

    def poll(self, limit: int = READ_LIMIT) -> list[Event]:
        if self.max_lines is not None and self.lines >= self.max_lines:
            return []
        try:
            with open_regular(self.path) as handle:
                handle.seek(self.offset)
                data = handle.read(limit)
        except OSError:
            return []
        self.offset += len(data)
        *complete, self._partial = (self._partial + data).split(b"\n")
        events: list[Event] = []
        for raw in complete:
            if self.max_lines is not None and self.lines >= self.max_lines:
                break
            self.lines += 1
            if not raw.strip():
                continue
            event = parse_event(raw, self.lines)
            if event is None:
                self.skipped += 1
            else:
                events.append(event)
        return events

    def read_all(self) -> list[Event]:
        """Every event up to the end of the file as it is now (a last unfinished line waits)."""
        events: list[Event] = []
        while True:
            batch_start = self.offset
            events += self.poll()
            if self.offset == batch_start:
                return events


def read_events(path: str | os.PathLike[str], max_lines: int | None = None) -> list[Event]:
    """All valid events of a file, in file order; a missing file has none."""
    return EventReader(path, max_lines).read_all()
