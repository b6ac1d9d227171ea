"""The meters of a run over time: one JSON line per sample in the run's `samples.jsonl`.

    recorder = SampleRecorder(record, sampler.row)      # sampler.row(pid→rank) → one row (a dict)
    RunSession(record, run, detectors=[..., recorder])  # polled about once a second while the run goes
    rows = read_samples(record)                         # typed, for `mgtutor report`'s charts

The follow loop already wakes once a second to poll its detectors with the run's state (which knows
each rank's pid), so the recorder is one of them: it writes a row and raises no alert. The run layer
cannot import the sampler (diagnostics sits above it): the function that takes a sample is injected.
A row on disk:

    {"t": 1764600000.0, "gpus": [{"index": 0, "name": "…", "util_pct": 97, "mem_used_mib": 4096,
      "mem_total_mib": 81559, "power_w": 312.5, "temp_c": 61}], "gpu_error": null,
     "host": {"cpu_pct": 41.0, "ram_used_mib": 9000, "ram_total_mib": 64000},
     "ranks": {"0": {"pid": 4242, "cpu_pct": 99.0, "rss_mib": 812.3}}}
"""
from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mgtutor.training.runs.events.types import Event
from mgtutor.training.runs.records.record import RunRecord
from mgtutor.training.runs.follow.runstate import RunState
from mgtutor.training.foundation.json_decode import parse
from mgtutor.training.foundation.safe_io import open_private, read_regular
from mgtutor.training.runs.follow.detectors import Alert

SAMPLES_FILE = "samples.jsonl"
EVERY_S = 1.0  # the meters' own rate: NVML is swept at most once a second
MAX_ROWS = 24 * 3600  # a day at 1 Hz (~10 MB for 8 GPUs); a longer run keeps its first day

SampleFn = Callable[[Mapping[int, int]], Mapping[str, Any]]


@dataclass(frozen=True)
class GpuMeters:
    index: int
    name: str = ""
    util_pct: float | None = None
    mem_used_mib: float | None = None
    mem_total_mib: float | None = None
    power_w: float | None = None
    temp_c: float | None = None


@dataclass(frozen=True)
class RankMeters:
    rank: int
    pid: int | None = None
    cpu_pct: float | None = None
    rss_mib: float | None = None


@dataclass(frozen=True)
class SampleRow:
    t: float
    gpus: list[GpuMeters] = field(default_factory=list)
    ranks: list[RankMeters] = field(default_factory=list)
    host_cpu_pct: float | None = None
    ram_used_mib: float | None = None
    gpu_error: str | None = None


def samples_path(record: RunRecord) -> Path:
    return record.path / SAMPLES_FILE


class SampleRecorder:
    """A Detector that never alerts: each poll (≈1 Hz) appends the meters to samples.jsonl.

    A sampler that breaks, or a disk that is full, ends the recording, never the run or its follower."""

    def __init__(self, record: RunRecord, sample: SampleFn, every_s: float = EVERY_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.record = record
        self.sample = sample
        self.every_s = every_s
        self.clock = clock
        self.rows = 0
        self.error: str | None = None
        self._next = 0.0

    def observe(self, events: Sequence[Event]) -> None:
        """Events carry nothing the meters need."""

    def poll(self, state: RunState, now: float) -> list[Alert]:
        if self.error is not None or self.rows >= MAX_ROWS or self.clock() < self._next:
            return []
        self._next = self.clock() + self.every_s
        try:
            row = dict(self.sample(state.pids()))
            line = json.dumps(row, separators=(",", ":"), allow_nan=False) + "\n"
            self._append(line)
        except Exception as exc:  # noqa: BLE001 - a meter's bug must not silence the run's detectors
            self.error = f"{type(exc).__name__}: {exc}"
            return []
        self.rows += 1
        return []

    def _append(self, line: str) -> None:
        fd = open_private(samples_path(self.record), append=True)  # 0600, never through a link, never a FIFO
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def parse_row(data: Any) -> SampleRow | None:
    """One line of samples.jsonl as a SampleRow; None for a line that is not one (a torn last line)."""
    if not isinstance(data, dict) or _num(data.get("t")) is None:
        return None
    gpus = [GpuMeters(index=int(g["index"]), name=str(g.get("name") or ""), util_pct=_num(g.get("util_pct")),
                      mem_used_mib=_num(g.get("mem_used_mib")), mem_total_mib=_num(g.get("mem_total_mib")),
                      power_w=_num(g.get("power_w")), temp_c=_num(g.get("temp_c")))
            for g in data.get("gpus") or [] if isinstance(g, dict) and isinstance(g.get("index"), int)]
    ranks = [RankMeters(rank=int(r), pid=m.get("pid") if isinstance(m.get("pid"), int) else None,
                        cpu_pct=_num(m.get("cpu_pct")), rss_mib=_num(m.get("rss_mib")))
             for r, m in (data.get("ranks") or {}).items() if str(r).isdigit() and isinstance(m, dict)]
    host: dict[str, Any] = data["host"] if isinstance(data.get("host"), dict) else {}
    error = data.get("gpu_error")
    return SampleRow(t=float(data["t"]), gpus=gpus, ranks=sorted(ranks, key=lambda m: m.rank),
                     host_cpu_pct=_num(host.get("cpu_pct")), ram_used_mib=_num(host.get("ram_used_mib")),
                     gpu_error=str(error) if error else None)


def read_samples(record: RunRecord) -> list[SampleRow]:
    """Every readable row, in time order; [] when the run recorded none (an older run, a replay)."""
    try:
        text = read_regular(samples_path(record)).decode("utf-8", "replace")  # a FIFO is never waited on
    except OSError:
        return []
    rows = []
    for line in text.splitlines():
        try:
            row = parse_row(parse(line))  # a nested or 400-digit line is skipped like a torn one
        except ValueError:
            continue
        if row is not None:
            rows.append(row)
    return sorted(rows, key=lambda r: r.t)
