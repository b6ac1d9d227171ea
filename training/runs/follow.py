"""Read a run's events as they are appended, and fold the per-rank results into one summary.

Headless and torch-free: `mgtutor train` and `mgtutor bench scaling` use it from the CLI process.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from mgtutor.training.runs.events import parse_line, read_events


class EventFollower:
    """New whole events since the last poll; a line still being written waits for the next poll."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.offset = 0
        self.partial = b""

    def poll(self) -> list[dict[str, Any]]:
        try:
            with self.path.open("rb") as handle:
                handle.seek(self.offset)
                data = handle.read()
        except FileNotFoundError:
            return []
        self.offset += len(data)
        data = self.partial + data
        lines = data.split(b"\n")
        self.partial = lines.pop()
        return [event for line in lines if (event := parse_line(line)) is not None]


def summarize(events_path: str | os.PathLike[str], world_size: int) -> dict[str, Any]:
    """Per-rank rows (result or error, last step) and totals for a summary table."""
    rows: dict[int, dict[str, Any]] = {r: {"rank": r} for r in range(world_size)}
    for event in read_events(events_path):
        row = rows.setdefault(event["rank"], {"rank": event["rank"]})
        if event["type"] == "step":
            row.update(step=event.get("step"), loss=event.get("loss"))
        elif event["type"] == "result":
            row.update(result=True, step=event.get("steps"), samples_per_s=event.get("samples_per_s"),
                       loss=event.get("final_loss"), mem_peak_mib=event.get("mem_peak_mib"),
                       data_wait_s=event.get("data_wait_s"), compute_s=event.get("compute_s"),
                       step_s=event.get("step_s"))
        elif event["type"] == "error":
            row["error"] = event.get("error")
    ordered = [rows[r] for r in sorted(rows)]
    done = [r for r in ordered if r.get("result")]
    total = sum(r.get("samples_per_s") or 0.0 for r in done)
    complete = bool(ordered) and len(done) == len(ordered)

    def mean(key: str) -> float | None:
        values = [r[key] for r in done if isinstance(r.get(key), (int, float))]
        return sum(values) / len(values) if values else None

    return {"ranks": ordered, "complete": complete, "samples_per_s": total if complete else None,
            "data_wait_s": mean("data_wait_s"), "compute_s": mean("compute_s"), "step_s": mean("step_s")}
