"""The one reader of events.jsonl: incremental (offset + partial line), schema-checked, never raising.

    reader = EventReader(record.events_path)
    for event in reader.poll(): ...          # the whole events written since the last poll
    reader.skipped                           # lines that were not an event of a known schema

A line still being written waits for the next poll. A line that is not JSON, not an object,
of an unknown type, or that breaks its type's schema (training/runs/events/types.py) is counted
in `skipped` and left out: a torn or foreign line never stops a consumer.
"""
from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mgtutor.training.runs.events.types import BY_KIND, BY_TYPE, AllReduceRow, Event, EventType
from mgtutor.training.foundation.safe_io import open_regular

READ_LIMIT = 1 << 22  # bytes per poll: a huge backlog is read over several polls


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


_CHECKS: dict[str, Callable[[Any], bool]] = {
    "int": _is_int,
    "float": _is_number,
    "str": lambda v: isinstance(v, str),
    "bool": lambda v: isinstance(v, bool),
    "None": lambda v: v is None,
    "list[int]": lambda v: isinstance(v, list) and all(_is_int(i) for i in v),
}


def _valid(annotation: str, value: Any) -> bool:
    return any(_CHECKS[alt](value) for alt in annotation.split(" | ") if alt in _CHECKS)


def _build(cls: type, data: dict[str, Any]) -> Any | None:
    """An instance of the dataclass `cls` from `data`, or None when a field breaks its declared type."""
    kwargs: dict[str, Any] = {}
    for spec in dataclasses.fields(cls):
        if spec.name in ("line", "extra", "source"):
            continue
        if spec.name not in data:
            if spec.default is dataclasses.MISSING and spec.default_factory is dataclasses.MISSING:
                return None
            continue
        value = data[spec.name]
        annotation = str(spec.type)
        if annotation == "tuple[AllReduceRow, ...]":
            if not isinstance(value, list) or not all(isinstance(row, dict) for row in value):
                return None
            rows = [_build(AllReduceRow, row) for row in value]
            if any(row is None for row in rows):
                return None
            value = tuple(rows)
        elif not _valid(annotation, value):
            return None
        kwargs[spec.name] = value
    return cls(**kwargs)


def event_from_json(data: Any, line: int = 0, source: str = "") -> Event | None:
    """The typed event for one decoded JSON value, or None when it is not a valid event."""
    if not isinstance(data, dict):
        return None
    try:
        kind = EventType(data.get("type"))
    except ValueError:
        return None
    cls = BY_KIND.get((kind, data["kind"])) if isinstance(data.get("kind"), str) else None
    cls = cls or BY_TYPE[kind]
    known = {f.name for f in dataclasses.fields(cls)}
    body = {k: v for k, v in data.items() if k != "type"}
    try:
        event = _build(cls, body)
    except (TypeError, ValueError):
        return None
    if event is None:
        return None
    extra = {k: v for k, v in body.items() if k not in known}
    return dataclasses.replace(event, line=line, extra=extra, source=source)


def parse_event(raw: str | bytes, line: int = 0) -> Event | None:
    """One event from one line of text, or None for a torn, foreign or malformed line."""
    try:
        text = raw.decode() if isinstance(raw, bytes) else raw
        data = json.loads(text)
    except (ValueError, UnicodeDecodeError, RecursionError):
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
