"""Read Flight Recorder dumps (NCCL; gloo in recent torch) the way torch's `torchfrtrace` does, in short.

    ranks = read_dumps(fr_dir)                    # {rank: FlightRank}, one per readable rank_<R> file
    lines = flight_lines(ranks)                   # each rank's last entered/completed collective, the first divergence

A dump is a pickle of plain dicts and lists (torch/distributed/flight_recorder/components/loader.py
reads it with pickle.load). It comes from the user's own ranks, but pickle can run code, so this
reader refuses any pickle that names a class or function: plain data only. Entries carry
`collective_seq_id`, `profiling_name` ("nccl:all_reduce"), `input_sizes`, `state`
(scheduled | started | completed) and `frames` (the Python call site); `pg_status` has each group's
last enqueued/started/completed sequence number.
"""
from __future__ import annotations

import io
import pickle
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from mgtutor.diagnostics.failures.hang.stack_dumps import is_user_file
from mgtutor.training.foundation.i18n import N_
from mgtutor.training.foundation.safe_io import entries, open_regular

DEFAULT_PG = "0"


class _PlainData(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"refused: the dump names {module}.{name} (plain data expected)")


@dataclass
class FlightEntry:
    seq: int
    op: str
    sizes: list[Any]
    state: str
    pg: str
    where: str | None  # file:line of the user's call, from the entry's frames


@dataclass
class FlightRank:
    rank: int
    path: Path
    entries: list[FlightEntry] = field(default_factory=list)  # default group only, in sequence order
    last_enqueued: int | None = None
    last_completed: int | None = None
    problem: str | None = None

    @property
    def last_entered(self) -> FlightEntry | None:
        return self.entries[-1] if self.entries else None

    def entry(self, seq: int) -> FlightEntry | None:
        return next((e for e in self.entries if e.seq == seq), None)


def load_dump(path: Path) -> dict[str, Any]:
    with open_regular(path) as handle:
        data = _PlainData(io.BytesIO(handle.read())).load()
    if not isinstance(data, dict) or "entries" not in data:
        raise ValueError("not a Flight Recorder dump (no 'entries')")
    return data


def read_rank(rank: int, path: Path) -> FlightRank:
    out = FlightRank(rank, path)
    try:
        data = load_dump(path)
    except (OSError, ValueError, EOFError, pickle.UnpicklingError, TypeError, AttributeError) as exc:
        out.problem = f"unreadable Flight Recorder dump {path.name}: {exc}"
        return out
    for raw in data.get("entries") or []:
        if not isinstance(raw, dict):
            continue
        group = raw.get("process_group") or (DEFAULT_PG, "")
        pg = str(group[0]) if isinstance(group, (list, tuple)) and group else str(group)
        if pg != DEFAULT_PG or raw.get("is_p2p"):
            continue
        name = str(raw.get("profiling_name") or "?")
        out.entries.append(FlightEntry(seq=int(raw.get("collective_seq_id") or 0), op=name.split(":", 1)[-1],
                                       sizes=list(raw.get("input_sizes") or []), state=str(raw.get("state") or "?"),
                                       pg=pg, where=_user_site(raw.get("frames") or [])))
    out.entries.sort(key=lambda e: e.seq)
    status = (data.get("pg_status") or {}).get(DEFAULT_PG) or {}
    out.last_enqueued = _int(status.get("last_enqueued_collective"))
    out.last_completed = _int(status.get("last_completed_collective"))
    if status.get("last_completed_collective") == -1:
        out.last_completed = 0  # nothing completed yet
    if out.last_completed is None:
        done = [e.seq for e in out.entries if e.state == "completed"]
        out.last_completed = max(done) if done else None
    return out


def read_dumps(folder: Path) -> dict[int, FlightRank]:
    """Every rank_<R> file of a run's fr/ folder."""
    out: dict[int, FlightRank] = {}
    for path in entries(folder, "rank_*"):
        suffix = path.name.removeprefix("rank_")
        if suffix.isdigit():
            out[int(suffix)] = read_rank(int(suffix), path)
    return out


def _user_site(frames: list[Any]) -> str | None:
    for frame in frames:
        if isinstance(frame, dict) and is_user_file(str(frame.get("filename", ""))):
            return f"{str(frame['filename']).rsplit('/', 1)[-1]}:{frame.get('line')}"
    return None


def _int(value: Any) -> int | None:
    try:
        number = int(value)
    except (TypeError, ValueError):
        return None
    return number if number >= 0 else None


@dataclass
class Divergence:
    seq: int
    entered: dict[int, FlightEntry]  # rank → what it ran at that sequence number
    missing: list[int]  # ranks that never reached it

    def text(self, say: Callable[[str], str] = str) -> str:
        """In English (the record) unless `say` translates."""
        parts = [say(N_("rank {rank} ran {op} {sizes}")).format(rank=r, op=e.op, sizes=e.sizes)
                 + (say(N_(" at {where}")).format(where=e.where) if e.where else "")
                 for r, e in sorted(self.entered.items())]
        if self.missing:
            parts.append(say(N_("rank {ranks} never reached it") if len(self.missing) == 1 else
                             N_("ranks {ranks} never reached it")).format(ranks=", ".join(map(str, self.missing))))
        return say(N_("first divergence at collective #{seq}: ")).format(seq=self.seq) + say(N_("; ")).join(parts)


def first_divergence(ranks: dict[int, FlightRank]) -> Divergence | None:
    readable = {r: f for r, f in ranks.items() if f.problem is None and f.entries}
    if len(readable) < 2:
        return None
    start = max(f.entries[0].seq for f in readable.values())  # the ring buffer may have dropped older ones
    end = max(f.entries[-1].seq for f in readable.values())
    for seq in range(start, end + 1):
        entered = {r: e for r, f in readable.items() if (e := f.entry(seq)) is not None}
        missing = sorted(r for r in readable if r not in entered)
        kinds = {(e.op, str(e.sizes)) for e in entered.values()}
        if missing or len(kinds) > 1:
            return Divergence(seq, entered, missing)
    return None


def flight_lines(ranks: dict[int, FlightRank], say: Callable[[str], str] = str) -> list[str]:
    """Each rank's last collectives and the first divergence; in English unless `say` translates."""
    lines = []
    for rank, fr in sorted(ranks.items()):
        if fr.problem:
            lines.append(f"rank {rank}: {fr.problem}")
            continue
        last = fr.last_entered
        if last is None:
            lines.append(f"rank {rank}: " + say(N_("no collective recorded")))
            continue
        where = say(N_(" at {where}")).format(where=last.where) if last.where else ""
        lines.append(f"rank {rank}: " + say(N_("last entered #{seq} {op} {sizes}{where} ({state}); last completed "
                                               "#{completed}")).format(
            seq=last.seq, op=last.op, sizes=last.sizes, where=where, state=last.state,
            completed=fr.last_completed if fr.last_completed is not None else "-"))
    divergence = first_divergence(ranks)
    if divergence is not None:
        lines.append(divergence.text(say))
    return lines


def pending(ranks: dict[int, FlightRank]) -> dict[int, FlightEntry]:
    """Ranks whose last entered collective has not completed: they wait in it."""
    out = {}
    for rank, fr in ranks.items():
        last = fr.last_entered
        if last is not None and fr.last_completed is not None and last.seq > fr.last_completed:
            out[rank] = last
    return out
