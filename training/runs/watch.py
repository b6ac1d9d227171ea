"""Live failure detectors for a running job, polled by the run loop (Monitor, `mgtutor run`).

    watch = RunWatch(run.record)            # rendezvous_after=30 s, silent_after=120 s
    for alert in watch.poll(): print(alert.message)

- `rendezvous_late`: after `rendezvous_after` s some ranks have not reached init_process_group. A rank
  is "at the rendezvous" once it has a TCP connection to the store (MASTER_PORT) or sent a
  rendezvous/step event, so the missing rank is named while the others wait, minutes before
  PyTorch's own 10–30 minute timeout.
- `straggler`: a rank's own per-step time (our workers' data_wait_s) dwarfs the others', or it is
  many steps behind.
- `possibly_hung`: no log line and no event for `silent_after` s; each rank's last lines are attached.
Headless: psutil and files only, never torch.
"""
from __future__ import annotations

import json
import os
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from mgtutor.training.runs.eventcheck import stragglers
from mgtutor.training.runs.records import RunRecord

JOINED_TYPES = {"rendezvous", "step", "epoch", "checkpoint", "result"}
RECENT_STEPS = 20
STEP_LAG = 5


@dataclass(frozen=True)
class Alert:
    kind: str  # rendezvous_late | straggler | possibly_hung
    ranks: tuple[int, ...]
    message: str
    last_lines: dict[int, list[str]] = field(default_factory=dict)


class RunWatch:
    def __init__(self, record: RunRecord, rendezvous_after: float = 30.0, silent_after: float = 120.0) -> None:
        self.record = record
        self.rendezvous_after = rendezvous_after
        self.silent_after = silent_after
        self._offset = 0
        self._pending = b""
        self._joined: set[int] = set()
        self._steps: dict[int, deque[tuple[int, dict[str, Any]]]] = {}
        self._line_no = 0
        self._last_event = 0.0

    def poll(self, now: float | None = None, running: bool | None = None) -> list[Alert]:
        """The alerts that hold now (call about once a second; cheap)."""
        now = time.time() if now is None else now
        if running is None:
            running = self.record.status() == "running"
        self._read_events()
        if not running:
            return []
        meta = self.record.meta()
        alerts = [a for a in (self._rendezvous(meta, now), self._silence(now)) if a]
        alerts += self._stragglers()
        return alerts

    def _read_events(self) -> None:
        try:
            with self.record.events_path.open("rb") as handle:
                handle.seek(self._offset)
                data = handle.read(1 << 22)
        except OSError:
            return
        self._offset += len(data)
        *lines, self._pending = (self._pending + data).split(b"\n")
        for raw in lines:
            self._line_no += 1
            try:
                event = json.loads(raw)
                rank = int(event["rank"])
            except (ValueError, KeyError, TypeError):
                continue
            self._last_event = max(self._last_event, float(event.get("t") or 0))
            if event.get("type") in JOINED_TYPES:
                self._joined.add(rank)
            if event.get("type") == "step":
                self._steps.setdefault(rank, deque(maxlen=RECENT_STEPS)).append((self._line_no, event))

    def _rendezvous(self, meta: dict[str, Any], now: float) -> Alert | None:
        world = int(meta.get("world_size") or 0)
        started = float(meta.get("started") or now)
        if not world or now - started < self.rendezvous_after or len(self._joined) >= world:
            return None
        infos = {i.get("rank"): i for i in self.record.ranks()}
        never_started = [r for r in range(world) if r not in infos]
        waiting, missing = [], []
        for rank in range(world):
            if rank in self._joined:
                waiting.append(rank)
            elif rank in infos:
                (waiting if _at_store(infos[rank].get("pid")) else missing).append(rank)
        if not missing and not never_started:
            return None  # everyone is at the store: a slow init, not a missing rank
        late = sorted(missing + never_started)
        names = ", ".join(map(str, late))
        parts = [f"rank{'s' if len(late) > 1 else ''} {names} not at the rendezvous after {now - started:.0f} s"]
        if never_started:
            parts.append(f"(never started: {', '.join(map(str, never_started))})")
        if waiting:
            parts.append(f"while rank{'s' if len(waiting) > 1 else ''} {', '.join(map(str, waiting))} wait"
                         f"{'' if len(waiting) > 1 else 's'} for {'them' if len(late) > 1 else 'it'}")
        message = " ".join(parts) + "; check that rank's log: it may be stuck before init_process_group."
        return Alert("rendezvous_late", tuple(late), message, self.last_lines(late))

    def _silence(self, now: float) -> Alert | None:
        paths = [p for _, _, p in self.record.rank_logs()] + [self.record.events_path]
        mtimes = [_mtime(p) for p in paths]
        latest = max([m for m in mtimes if m] + [self._last_event, float(self.record.meta().get("started") or now)])
        if now - latest < self.silent_after:
            return None
        ranks = sorted({r for r, _, _ in self.record.rank_logs()})
        return Alert("possibly_hung", tuple(ranks),
                     f"possibly hung: no output and no event from any rank for {now - latest:.0f} s",
                     self.last_lines(ranks))

    def _stragglers(self) -> list[Alert]:
        recent = [item for items in self._steps.values() for item in items]
        alerts = [Alert("straggler", (rank,), f"rank {rank} is a straggler: {fields['evidence_text']}")
                  for _kind, rank, fields, _lines in stragglers(recent) if rank is not None]
        last = {rank: items[-1][1].get("step") for rank, items in self._steps.items() if items}
        steps = [s for s in last.values() if isinstance(s, int)]
        if len(steps) >= 2:
            lead = max(steps)
            for rank, step in sorted(last.items()):
                if isinstance(step, int) and lead - step >= STEP_LAG and not any(rank in a.ranks for a in alerts):
                    alerts.append(Alert("straggler", (rank,), f"rank {rank} is {lead - step} steps behind the fastest rank"))
        return alerts

    def last_lines(self, ranks: list[int], count: int = 3) -> dict[int, list[str]]:
        out: dict[int, list[str]] = {}
        for rank in ranks:
            lines: list[str] = []
            for stream in ("stdout", "stderr"):
                lines += _tail(self.record.rank_log(rank, stream), count)
            out[rank] = lines[-2 * count:]
        return out


def _at_store(pid: Any) -> bool:
    """Whether the rank process holds a TCP connection to its MASTER_PORT (the rendezvous store)."""
    if not isinstance(pid, int):
        return False
    try:
        proc = psutil.Process(pid)
        port = int(proc.environ().get("MASTER_PORT", "0"))
        return any(c.raddr and c.raddr.port == port for c in proc.net_connections(kind="tcp"))
    except (psutil.Error, ValueError, OSError):
        return False


def _mtime(path: Path) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0


def _tail(path: Path, count: int) -> list[str]:
    try:
        with path.open("rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - 8192))
            data = handle.read()
    except OSError:
        return []
    lines = [line for line in data.decode("utf-8", "replace").replace("\r", "\n").split("\n") if line.strip()]
    return lines[-count:]
