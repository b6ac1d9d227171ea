"""Run records: one directory per run, the source of truth for logs, events and outcome.

    $XDG_STATE_HOME/mgtutor/runs/<run-id>/      (mode 0700)
        meta.json          argv, world size, backend, devices, env, host, start/end
        torchrun.log       the launcher's and torchrun's own output
        logs/rank<R>.stdout.log, logs/rank<R>.stderr.log   written by the ranks themselves
        ranks/rank<R>.json pid, exit code or signal, start/end (from the rank wrapper)
        events.jsonl       our workers' events
        result.json        per-rank outcome, first failure, duration

A run whose supervisor died still has a readable record: `result()` rebuilds it from the rank files.
"""
from __future__ import annotations

import json
import os
import re
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mgtutor.training.runs.multinode import hosted_ranks

RUN_DIR_ENV = "MGTUTOR_RUN_DIR"
RUN_ID_ENV = "MGTUTOR_RUN_ID"
_RANK_LOG = re.compile(r"rank(\d+)\.(stdout|stderr)\.log$")


def state_home() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "mgtutor"


def runs_root() -> Path:
    return state_home() / "runs"


def write_json_atomic(path: Path, data: Any) -> None:
    """Readers never see half a file: write beside it, then rename over it."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)


def read_json(path: Path) -> Any | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def new_run_id(label: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", label.lower()).strip("-")[:24] or "run"
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{slug}-{secrets.token_hex(2)}"


@dataclass(frozen=True)
class RunRecord:
    """A view on one run directory; every method reads or writes the files directly."""

    path: Path

    def __init__(self, path: str | os.PathLike[str]) -> None:
        object.__setattr__(self, "path", Path(path))

    @classmethod
    def create(cls, label: str, root: Path | None = None) -> RunRecord:
        root = root or runs_root()
        root.mkdir(parents=True, exist_ok=True, mode=0o700)
        path = root / new_run_id(label)
        path.mkdir(mode=0o700)
        os.chmod(path, 0o700)  # mkdir's mode is masked by the umask
        (path / "logs").mkdir()
        (path / "ranks").mkdir()
        return cls(path)

    @property
    def run_id(self) -> str:
        return self.path.name

    @property
    def events_path(self) -> Path:
        return self.path / "events.jsonl"

    @property
    def torchrun_log(self) -> Path:
        return self.path / "torchrun.log"

    def rank_log(self, rank: int, stream: str) -> Path:
        return self.path / "logs" / f"rank{rank}.{stream}.log"

    def rank_logs(self) -> list[tuple[int, str, Path]]:
        """(rank, stream, path) of every rank log present, ordered by rank then stream."""
        found = []
        for entry in (self.path / "logs").glob("rank*.log"):
            match = _RANK_LOG.search(entry.name)
            if match:
                found.append((int(match.group(1)), match.group(2), entry))
        return sorted(found)

    # meta.json
    def meta(self) -> dict[str, Any]:
        return read_json(self.path / "meta.json") or {}

    def write_meta(self, meta: dict[str, Any]) -> None:
        write_json_atomic(self.path / "meta.json", meta)

    def update_meta(self, **fields: Any) -> None:
        meta = self.meta()
        meta.update(fields)
        self.write_meta(meta)

    # ranks/rank<R>.json
    def write_rank(self, info: dict[str, Any]) -> None:
        write_json_atomic(self.path / "ranks" / f"rank{info['rank']}.json", info)

    def ranks(self) -> list[dict[str, Any]]:
        infos = [read_json(p) for p in (self.path / "ranks").glob("rank*.json")]
        return sorted((i for i in infos if isinstance(i, dict)), key=lambda i: i.get("rank", 0))

    # result.json
    def saved_result(self) -> dict[str, Any] | None:
        return read_json(self.path / "result.json")

    def write_result(self, result: dict[str, Any]) -> None:
        write_json_atomic(self.path / "result.json", result)

    def result(self) -> dict[str, Any]:
        """The saved result, or one rebuilt from the rank files when the supervisor died."""
        return self.saved_result() or build_result(self)

    def status(self) -> str:
        """running | finished | failed | stopped | lost (no result and no live process)."""
        result = self.saved_result()
        if result:
            return result.get("status", "finished")
        if _alive(self.meta().get("supervisor_pid")):
            return "running"
        return "lost"


def _alive(pid: Any) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def rank_outcome(info: dict[str, Any]) -> dict[str, Any]:
    return {"rank": info.get("rank"), "exit_code": info.get("exit_code"), "signal": info.get("signal"),
            "pid": info.get("pid"), "ended": info.get("ended")}


def _failed(entry: dict[str, Any]) -> bool:
    return entry.get("signal") is not None or entry.get("exit_code") not in (0, None)


def build_result(record: RunRecord, torchrun_exit: int | None = None, stopped: bool = False) -> dict[str, Any]:
    """result.json from the rank files: who failed first is the failing rank that ended first."""
    meta = record.meta()
    world_size = meta.get("world_size") or 0
    infos = record.ranks()
    by_rank = {info.get("rank"): rank_outcome(info) for info in infos}
    if (meta.get("nnodes") or 1) > 1:  # this node's record lists only the global ranks it hosts
        rank_ids = sorted(set(hosted_ranks(meta, infos)) | {r for r in by_rank if isinstance(r, int)})
    else:
        rank_ids = list(range(max(world_size, len(by_rank))))
    ranks = [by_rank.get(r, {"rank": r, "exit_code": None, "signal": None, "pid": None, "ended": None})
             for r in rank_ids]
    failures = sorted((r for r in ranks if _failed(r)), key=lambda r: r.get("ended") or float("inf"))
    first = failures[0] if failures and not stopped else None
    for entry in ranks:
        if entry.get("ended") is None and entry.get("pid") is None:
            entry["outcome"] = "never started"
        elif entry.get("ended") is None:
            entry["outcome"] = "no exit recorded"
        elif not _failed(entry):
            entry["outcome"] = "ok"
        elif first is None or entry is first:
            entry["outcome"] = "stopped" if stopped else "failed"
        elif entry.get("signal") in ("SIGTERM", "SIGKILL") and (entry.get("ended") or 0) >= (first.get("ended") or 0):
            entry["outcome"] = "stopped after the first failure"
        else:
            entry["outcome"] = "failed"
    if stopped:
        status = "stopped"
    elif first is not None or (torchrun_exit not in (0, None)):
        status = "failed"
    elif not ranks or any(r["outcome"] != "ok" for r in ranks):
        status = "failed" if torchrun_exit is not None else "lost"
    else:
        status = "finished"
    started = meta.get("started")
    ended = max((r.get("ended") or 0 for r in ranks), default=0) or time.time()
    return {
        "run_id": record.run_id,
        "status": status,
        "backend": meta.get("backend"),
        "world_size": world_size,
        "nnodes": meta.get("nnodes") or 1,
        "node_rank": meta.get("node_rank") or 0,
        "ranks": ranks,
        "first_failure": None if first is None else
        {"rank": first["rank"], "exit_code": first["exit_code"], "signal": first["signal"]},
        "torchrun_exit_code": torchrun_exit,
        "duration_s": round(ended - started, 3) if started else None,
    }


def exit_code_for(result: dict[str, Any]) -> int:
    """The shell exit code of a run: the first failing rank's code, 128+N for signal N."""
    import signal as _signal

    first = result.get("first_failure")
    if first:
        if first.get("signal"):
            return 128 + int(getattr(_signal, first["signal"], 1))
        return int(first.get("exit_code") or 1)
    if result.get("status") == "stopped":
        return 130
    return 0 if result.get("status") == "finished" else 1


def list_runs(root: Path | None = None) -> Iterator[RunRecord]:
    """Run records, newest first."""
    root = root or runs_root()
    if not root.is_dir():
        return
    dirs = [p for p in root.iterdir() if p.is_dir() and (p / "meta.json").exists()]
    for path in sorted(dirs, key=lambda p: p.name, reverse=True):  # ids start with the start time
        yield RunRecord(path)


def find_run(ref: str, root: Path | None = None) -> RunRecord | None:
    """A run by path, full id or unique id prefix/suffix."""
    if os.sep in ref and Path(ref).is_dir():
        return RunRecord(ref)
    matches = [r for r in list_runs(root) if r.run_id == ref]
    if not matches:
        matches = [r for r in list_runs(root) if r.run_id.startswith(ref) or r.run_id.endswith(ref)]
    return matches[0] if len(matches) == 1 else None
