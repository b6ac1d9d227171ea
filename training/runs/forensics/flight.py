"""NCCL's Flight Recorder for the ranks mgtutor starts: a trace buffer, dumps into the run dir, and a
dump asked for from outside while the ranks hang.

    env.update(flight_env(record))         # at launch (ProcessGroupNCCL reads these when it is created)
    asked = request_dump(record, {0: pid0, 1: pid1})   # at a stall: writes to each rank's dump pipe
    fr_dir(record) / "rank_0"              # a pickle, read by diagnostics/failures/hang/flight_recorder.py

Variable names, checked against PyTorch's source (2.4 to 2.14): the ring buffer is
TORCH_NCCL_TRACE_BUFFER_SIZE (newer builds also read TORCH_FR_BUFFER_SIZE); the dump file prefix is
TORCH_NCCL_DEBUG_INFO_TEMP_FILE (2.4-2.6), TORCH_FR_DUMP_TEMP_FILE (later builds read it first), the
file being prefix + global rank; TORCH_NCCL_DUMP_ON_TIMEOUT dumps when the watchdog times out; and
TORCH_NCCL_DEBUG_INFO_PIPE_FILE makes each rank's heartbeat monitor open a FIFO `<prefix><rank>.pipe`:
any byte written there asks that rank for a dump now. Only NCCL process groups have that pipe; for
gloo (whose collectives torch >= 2.7 also records) mgtutor's stack hook (stackhook/sitecustomize.py)
keeps a pipe of its own per rank process, `<run>/stacks/live/fr_pid<PID>.pipe`, and writes torch's
dump when asked. A torch without a Flight Recorder simply writes nothing, and the report says so.
Headless and torch-free.
"""
from __future__ import annotations

import errno
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from mgtutor.training.runs.records.record import RunRecord
from mgtutor.training.foundation.i18n import N_
from mgtutor.training.foundation.safe_io import entries
from mgtutor.training.foundation.said import Said
from mgtutor.training.runs.forensics.stacks import live_dir

TRACE_ENTRIES = "2000"


def fr_dir(record: RunRecord) -> Path:
    return record.path / "fr"


def flight_env(record: RunRecord, base: dict[str, str] | None = None, backend: str = "nccl") -> dict[str, str]:
    """The Flight Recorder variables for the ranks; a value the user set already is left alone. On
    gloo only the current names (torch records gloo collectives only in versions that read them; the
    old NCCL names would print a deprecation warning in every rank's log)."""
    base = base or {}
    folder = fr_dir(record)
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
    except OSError:
        return {}  # nowhere to dump: leave NCCL's defaults
    wanted = {
        "TORCH_NCCL_TRACE_BUFFER_SIZE": TRACE_ENTRIES,
        "TORCH_FR_BUFFER_SIZE": TRACE_ENTRIES,
        "TORCH_NCCL_DUMP_ON_TIMEOUT": "1",
        "TORCH_NCCL_DEBUG_INFO_TEMP_FILE": str(folder / "rank_"),
        "TORCH_FR_DUMP_TEMP_FILE": str(folder / "rank_"),
        "TORCH_NCCL_DEBUG_INFO_PIPE_FILE": str(folder / "pipe_rank_"),
    }
    if backend != "nccl":
        wanted = {k: v for k, v in wanted.items() if k.startswith("TORCH_FR_")}
    return {k: v for k, v in wanted.items() if k not in base}


@dataclass
class DumpRequest:
    asked: list[int] = field(default_factory=list)  # ranks whose pipe took the request
    dumped: list[int] = field(default_factory=list)  # ranks whose dump file appeared or changed
    problems: list[str] = field(default_factory=list)


def dump_files(record: RunRecord) -> dict[int, Path]:
    out: dict[int, Path] = {}
    for path in entries(fr_dir(record), "rank_*"):
        suffix = path.name.removeprefix("rank_")
        if suffix.isdigit():
            out[int(suffix)] = path
    return out


def request_dump(record: RunRecord, ranks: Mapping[int, int | None], wait_s: float = 5.0) -> DumpRequest:
    """Ask each rank (rank → its main pid) for a dump through NCCL's pipe, else the stack hook's, and
    wait for the files."""
    request = DumpRequest()
    folder = fr_dir(record)
    before = {r: _mtime(p) for r, p in dump_files(record).items()}
    for rank, pid in sorted(ranks.items()):
        pipe = folder / f"pipe_rank_{rank}.pipe"
        if not pipe.exists() and pid is not None:
            pipe = live_dir(record, pid) / f"fr_pid{pid}.pipe"
        if not pipe.exists():
            request.problems.append(Said(N_("rank {rank}: no Flight Recorder pipe (no NCCL group yet, and the stack "
                                            "hook is not loaded in this rank)"), rank=rank))
            continue
        try:
            fd = os.open(pipe, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as exc:
            why = (Said(N_("nobody reads it (the rank's NCCL monitor is gone)")) if exc.errno == errno.ENXIO
                   else exc.strerror)
            request.problems.append(Said(NO_PIPE_WRITE, rank=rank, why=why))
            continue
        try:
            os.write(fd, b"1")
            request.asked.append(rank)
        except OSError as exc:
            request.problems.append(Said(NO_PIPE_WRITE, rank=rank, why=exc.strerror))
        finally:
            os.close(fd)
    deadline = time.monotonic() + (wait_s if request.asked else 0)
    while time.monotonic() < deadline:
        files = dump_files(record)
        request.dumped = sorted(r for r in request.asked if r in files and _mtime(files[r]) > before.get(r, 0.0))
        if len(request.dumped) == len(request.asked):
            time.sleep(0.2)  # the writer flushes once; give it a moment to finish the file
            break
        time.sleep(0.1)
    for rank in sorted(set(request.asked) - set(request.dumped)):
        request.problems.append(Said(N_("rank {rank}: asked for a Flight Recorder dump, none written within {seconds:g} s "
                                        "(a torch without a Flight Recorder for this backend writes none)"),
                                     rank=rank, seconds=wait_s))
    return request


NO_PIPE_WRITE = N_("rank {rank}: cannot write its dump pipe: {why}")


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0
