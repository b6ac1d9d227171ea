"""Run records: one directory per run, the source of truth for logs, events and outcome.

    $XDG_STATE_HOME/mgtutor/runs/<run-id>/      (mode 0700)
        meta.json          argv, world size, backend, devices, env, host, start/end
        torchrun.log       the launcher's and torchrun's own output
        logs/rank<R>.stdout.log, logs/rank<R>.stderr.log   written by the ranks themselves
        ranks/rank<R>.json pid, exit code or signal, start/end (from the rank wrapper)
        events.jsonl       our workers' events
        result.json        per-rank outcome, first failure, duration
        stop.lock          held by a stop until its report is in result.json (RunRecord.stopping)

A run whose supervisor died still has a readable record: `result()` rebuilds it from the rank files.
"""
from __future__ import annotations

import fcntl
import json
import os
import re
import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import platformdirs
import psutil

from mgtutor.training.foundation.i18n import N_, _
from mgtutor.training.foundation.said import Said, english, said_again
from mgtutor.training.foundation.json_decode import DecodeError, parse
from mgtutor.training.runs.net.multinode import hosted_ranks
from mgtutor.training.runs.records.types import (
    MAX_LOCAL_RANKS,
    FirstFailure,
    RankExit,
    RankOutcome,
    RunMeta,
    RunResult,
    RunStatus,
    StopReport,
)
from mgtutor.training.foundation.safe_io import (
    PRIVATE_DIR,
    entries,
    open_private,
    open_regular,
    private_dir,
    read_regular,
    write_private_atomic,
)

__all__ = ["FirstFailure", "RankExit", "RankOutcome", "RunMeta", "RunRecord", "RunResult", "RunStatus",
           "StopReport", "build_result", "exit_code_for", "find_run", "list_runs", "runs_root"]

RUN_DIR_ENV = "MGTUTOR_RUN_DIR"
RUN_ID_ENV = "MGTUTOR_RUN_ID"
SUPERVISOR_MODULE = "mgtutor.training.runs.launch.supervise"
STOP_LOCK = "stop.lock"
MIN_ID_PART = 4  # `runs show 2` must not pick a run by one character
_RANK_LOG = re.compile(r"rank(\d+)\.(stdout|stderr)\.log$")


def state_home() -> Path:
    """$XDG_STATE_HOME/mgtutor (default ~/.local/state/mgtutor), as platformdirs places state on this OS."""
    return platformdirs.user_state_path("mgtutor", appauthor=False)


def private_state_dir(*parts: str) -> Path:
    """A folder under the state home, it and the state home mode 0700; UnsafePath (an OSError that
    says what to do) when a symlink or a file stands where a folder should be."""
    path = private_dir(state_home())
    for part in parts:
        path = private_dir(path / part)
    return path


def runs_root() -> Path:
    return state_home() / "runs"


def write_json_atomic(path: Path, data: Any) -> None:
    """Readers never see half a file: a 0600 file beside it, then renamed over it (never through a symlink)."""
    write_private_atomic(path, json.dumps(data, indent=2, sort_keys=True) + "\n")


MAX_RECORD_BYTES = 4 << 20  # a result.json of MAX_LOCAL_RANKS ranks is under 1 MiB


def read_json(path: Path) -> Any | None:
    """The JSON in `path` (json_decode's limits), or None when it cannot be read whole."""
    return read_json_why(path)[0]


# Why a record file could not be read: English Saids (compared, printed by --json), said with `said_problem`.
MISSING = N_("{name} is missing")
UNREADABLE = N_("{name} is unreadable ({why})")
NOT_JSON = N_("{name} is truncated or not JSON ({size} bytes)")
NO_OBJECT = N_("{name} holds no JSON object")
TOO_LARGE = N_("{name} is larger than {mib} MiB")
NOT_READ = N_("{name} cannot be read: {why}")
HAS_A = N_("{name} has a {problem}")


def said_problem(problem: str) -> str:
    """A record's problem in the language in force (any other note is left as it is)."""
    return said_again(problem) if isinstance(problem, Said) else problem


def read_json_why(path: Path) -> tuple[Any, str | None]:
    """(data, None), or (None, why it could not be read): missing, unreadable, not a file, too large, not
    whole JSON, or JSON past json_decode's limits (nested too deep, a 400-digit number, NaN)."""
    try:
        raw = read_regular(path, limit=MAX_RECORD_BYTES + 1)
    except FileNotFoundError:
        return None, english(MISSING, name=path.name)
    except OSError as exc:
        return None, english(UNREADABLE, name=path.name, why=exc.strerror or exc)
    if len(raw) > MAX_RECORD_BYTES:
        return None, english(TOO_LARGE, name=path.name, mib=MAX_RECORD_BYTES >> 20)
    text = raw.decode("utf-8", "replace")
    try:
        data = parse(text)
    except DecodeError as exc:
        if exc.why.startswith("not JSON"):
            return None, english(NOT_JSON, name=path.name, size=len(text))
        return None, english(NOT_READ, name=path.name, why=exc.why)
    if not isinstance(data, dict):
        return None, english(NO_OBJECT, name=path.name)
    return data, None


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
        """A new run directory (0700, as are logs/ and ranks/); OSError (UnsafePath says what to do) when
        the runs folder is a symlink, a file, or not writable."""
        root = private_dir(root) if root else private_state_dir("runs")
        path = root / new_run_id(label)
        path.mkdir(mode=PRIVATE_DIR)
        os.chmod(path, PRIVATE_DIR)  # mkdir's mode is masked by the umask
        for sub in ("logs", "ranks"):
            (path / sub).mkdir(mode=PRIVATE_DIR)
            os.chmod(path / sub, PRIVATE_DIR)
        os.close(open_private(path / STOP_LOCK, exclusive=True))  # there before any reader looks (settled)
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
        for entry in entries(self.path / "logs", "rank*.log"):
            match = _RANK_LOG.search(entry.name)
            if match:
                found.append((int(match.group(1)), match.group(2), entry))
        return sorted(found)

    # meta.json
    def meta(self) -> RunMeta:
        """The run's meta; when meta.json cannot be read, an empty one whose `problem` says why."""
        data, problem = read_json_why(self.path / "meta.json")
        meta = RunMeta.from_json(data)
        if meta.problem:
            meta.problem = english(HAS_A, name="meta.json", problem=meta.problem)
        meta.problem = problem or meta.problem
        return meta

    def write_meta(self, meta: RunMeta) -> None:
        write_json_atomic(self.path / "meta.json", meta.to_json())

    def update_meta(self, **fields: Any) -> None:
        data = read_json(self.path / "meta.json")
        data = data if isinstance(data, dict) else {}
        data.update({k: v.value if isinstance(v, RunStatus) else v for k, v in fields.items()})
        write_json_atomic(self.path / "meta.json", data)

    # ranks/rank<R>.json
    def write_rank(self, info: RankExit) -> None:
        write_json_atomic(self.path / "ranks" / f"rank{info.rank}.json", info.to_json())

    def ranks(self) -> list[RankExit]:
        infos = [read_json(p) for p in entries(self.path / "ranks", "rank*.json")]
        exits = [RankExit.from_json(i) for i in infos if isinstance(i, dict) and isinstance(i.get("rank", 0), int)]
        return sorted(exits, key=lambda i: i.rank)

    # result.json
    def saved_result(self) -> RunResult | None:
        return self.read_result()[0]

    def read_result(self) -> tuple[RunResult | None, str | None]:
        """(the saved result, None); (None, None) while there is none yet; (None, why) when result.json is
        there and cannot be read; (the result, which fields were left out) when parts of it have the wrong type."""
        data, problem = read_json_why(self.path / "result.json")
        if data is None:
            return None, None if problem == MISSING.format(name="result.json") else problem
        if not data:
            return None, None
        result = RunResult.from_json(data)
        if result.problem:
            result.problem = english(HAS_A, name="result.json", problem=result.problem)
        return result, result.problem

    def unreadable(self) -> bool:
        """No meta.json to read (mode 000, another owner's, not a file) and no result: nothing says how it went."""
        problem = self.meta().problem
        return problem is not None and not problem.startswith("meta.json has") and self.saved_result() is None

    def problems(self) -> list[str]:
        """Why parts of this record could not be read (missing, unreadable, not a file, wrong type)."""
        found = [self.meta().problem, self.read_result()[1]]
        return [p for p in found if p]

    def write_result(self, result: RunResult) -> None:
        write_json_atomic(self.path / "result.json", result.to_json())

    def result(self) -> RunResult:
        """The saved result, or one rebuilt from the rank files when the supervisor died (its `problem`
        saying why result.json could not be read, if it is there)."""
        saved, problem = self.read_result()
        if saved is not None:
            return saved
        rebuilt = build_result(self)
        rebuilt.problem = problem
        return rebuilt

    # stop.lock
    @contextmanager
    def stopping(self) -> Iterator[None]:
        """Held by a stop (Run.stop) from its first signal until its report is in result.json. The
        supervisor writes its own result as it exits, before the stop can tell whether anything
        survived: until the stop is done, that result is not the run's last word."""
        try:
            fd = open_private(self.path / STOP_LOCK, append=True)
        except OSError:  # no lock to take: the stop itself must still go ahead
            fd = None
        try:
            if fd is not None:
                _lock(fd, fcntl.LOCK_EX)
            yield
        finally:
            if fd is not None:
                os.close(fd)  # the lock goes with it, also when the stopping process dies

    @contextmanager
    def settled(self) -> Iterator[bool]:
        """False while a stop is under way. True holds the lock shared to the end of the block, so
        no stop can begin and end between the reads made in it."""
        try:
            handle = open_regular(self.path / STOP_LOCK)
        except OSError:  # a record from before the lock, or not ours to read: no stop of ours runs
            handle = None
        if handle is None:
            yield True
            return
        with handle:
            yield _lock(handle.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)

    def settled_result(self) -> RunResult | None:
        """The saved result, unless a stop is still to add its report to it (then None)."""
        with self.settled() as settled:
            return self.saved_result() if settled else None

    def stop_under_way(self) -> bool:
        with self.settled() as settled:
            return not settled

    def status(self) -> RunStatus:
        """running | finished | failed | stopped | lost (no result and no live process). A run
        whose stop is under way is running: its processes are still being ended."""
        with self.settled() as settled:
            result = self.saved_result() if settled else None
            if result:
                return result.status
            if not settled or self.supervisor_pid() is not None:
                return RunStatus.RUNNING
            return RunStatus.LOST

    def supervisor_pid(self) -> int | None:
        """The pid of this run's live supervisor, or None. A pid in meta.json may since have been
        reused by another process (after a reboot, say), or written by hand: it counts only when the
        process proves it is this run's supervisor (is_supervisor_of), so nothing that stops a run
        can hit a stranger. A process we may not read is no proof."""
        pid = self.meta().supervisor_pid
        if not pid_alive(pid):
            return None
        try:
            return pid if is_supervisor_of(psutil.Process(pid), self) else None
        except psutil.Error:
            return None


def is_supervisor_of(proc: psutil.Process, record: RunRecord) -> bool:
    """The process runs mgtutor's supervisor on this run's folder and carries its run id in its
    environment (launch() writes the pid only once the supervisor has exec'd, so both hold from the
    first moment). psutil.AccessDenied when the process is not ours to read."""
    cmdline = proc.cmdline()
    if SUPERVISOR_MODULE not in cmdline or not carries_run(proc, record):
        return False
    folder = cmdline[-1]
    try:
        return os.path.samefile(folder, record.path)
    except OSError:
        return folder.rstrip(os.sep).endswith(os.sep + record.run_id)


def carries_run(proc: psutil.Process, record: RunRecord) -> bool:
    """The process was started for this run: the launcher gives every process it starts (the
    supervisor, torchrun, each rank and what a rank starts) the run's id and folder in its
    environment. A pid a record names (meta.json, ranks/rank<R>.json) is signalled only when this
    holds: it may since be a stranger's. psutil.AccessDenied when the process is not ours to read."""
    env = proc.environ()
    if env.get(RUN_ID_ENV) != record.run_id:
        return False
    folder = env.get(RUN_DIR_ENV)
    if not folder:
        return True  # a run launched before the folder was in the environment
    try:
        return os.path.samefile(folder, record.path)
    except OSError:
        return False


def _lock(fd: int, how: int) -> bool:
    """flock; False only when the lock is held through another open of the file (this process's
    too). A filesystem without locks leaves things as they were before the lock existed."""
    try:
        fcntl.flock(fd, how)
    except BlockingIOError:
        return False
    except OSError:
        pass
    return True


def pid_alive(pid: Any) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def rank_outcome(info: RankExit) -> RankOutcome:
    return RankOutcome(rank=info.rank, exit_code=info.exit_code, signal=info.signal, pid=info.pid, ended=info.ended)


def _outcome(entry: RankOutcome, first: RankOutcome | None, stopped: bool) -> str:
    if entry.ended is None and entry.pid is None:
        return "never started"
    if entry.ended is None:
        return "no exit recorded"
    if not entry.failed:
        return "ok"
    if first is None or entry is first:
        return "stopped" if stopped else "failed"
    if entry.signal in ("SIGTERM", "SIGKILL") and (entry.ended or 0) >= (first.ended or 0):
        return "stopped after the first failure"
    return "failed"


def build_result(record: RunRecord, torchrun_exit: int | None = None, stopped: bool = False) -> RunResult:
    """result.json from the rank files: who failed first is the failing rank that ended first."""
    meta = record.meta()
    world_size = meta.world_size
    infos = record.ranks()
    by_rank = {info.rank: rank_outcome(info) for info in infos}
    if meta.nnodes > 1:  # this node's record lists only the global ranks it hosts
        rank_ids = sorted(set(hosted_ranks(meta, infos)) | set(by_rank))[:MAX_LOCAL_RANKS]
    else:  # one node hosts them all; a forged world size of a million must not make a million entries
        rank_ids = list(range(max(min(world_size, MAX_LOCAL_RANKS), len(by_rank))))
    ranks = [by_rank.get(r) or RankOutcome(rank=r) for r in rank_ids]
    failures = sorted((r for r in ranks if r.failed), key=lambda r: r.ended or float("inf"))
    first = failures[0] if failures and not stopped else None
    for entry in ranks:
        entry.outcome = _outcome(entry, first, stopped)
    if stopped:
        status = RunStatus.STOPPED
    elif first is not None or (torchrun_exit not in (0, None)):
        status = RunStatus.FAILED
    elif not ranks or any(r.outcome != "ok" for r in ranks):
        status = RunStatus.FAILED if torchrun_exit is not None else RunStatus.LOST
    else:
        status = RunStatus.FINISHED
    started = meta.started
    ended = max((r.ended or 0 for r in ranks), default=0) or time.time()
    return RunResult(
        run_id=record.run_id, status=status, backend=meta.backend or None, world_size=world_size,
        nnodes=meta.nnodes, node_rank=meta.node_rank, ranks=ranks,
        first_failure=None if first is None else FirstFailure(first.rank, first.exit_code, first.signal),
        torchrun_exit_code=torchrun_exit, duration_s=round(ended - started, 3) if started else None)


def exit_code_for(result: RunResult) -> int:
    """The shell exit code of a run: the first failing rank's code, 128+N for signal N."""
    import signal as _signal

    first = result.first_failure
    if first:
        if first.signal:
            return 128 + int(getattr(_signal, first.signal, 1))
        return int(first.exit_code or 1)
    if result.status == RunStatus.STOPPED:
        return 130
    return 0 if result.status == RunStatus.FINISHED else 1


def list_runs(root: Path | None = None) -> Iterator[RunRecord]:
    """Run records, newest first."""
    root = root or runs_root()
    try:
        dirs = [p for p in root.iterdir() if _is_run_dir(p)]
    except OSError:  # missing, a file, or not ours to list
        return  # the runs folder itself cannot be listed
    for path in sorted(dirs, key=lambda p: p.name, reverse=True):  # ids start with the start time
        yield RunRecord(path)


def runs_root_problem(root: Path | None = None) -> str | None:
    """Why the runs folder cannot be listed (not a folder, not ours to read), or None (also when it
    does not exist yet: no runs is no problem)."""
    root = root or runs_root()
    try:
        os.listdir(root)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"cannot list {root}: {exc.strerror or exc}"
    return None


def _is_run_dir(path: Path) -> bool:
    """A folder with a meta.json, or one that cannot be looked into (mode 000, another owner's):
    that one is listed too, and says why it cannot be read, so one bad record hides no others."""
    try:
        if not path.is_dir() or path.is_symlink():
            return False
        os.lstat(path / "meta.json")  # not exists(): a meta.json that links to itself is listed too
        return True
    except PermissionError:
        return True
    except OSError:
        return False


def find_run(ref: str, root: Path | None = None) -> RunRecord | None:
    """A run by path, full id or unique id prefix/suffix (see find_run_why)."""
    return find_run_why(ref, root)[0]


def find_run_why(ref: str, root: Path | None = None) -> tuple[RunRecord | None, str]:
    """(the run, "") by its path, its full id, or a prefix or suffix of at least MIN_ID_PART characters
    that only it has; else (None, why not), a line to show the user."""
    if os.sep in ref or ref.startswith("."):
        path = Path(ref)
        if not path.exists():
            return None, _("{ref}: no such run directory").format(ref=ref)
        return ((RunRecord(path), "") if _is_run_dir(path)
                else (None, _("{ref} is no run directory (no meta.json)").format(ref=ref)))
    runs = list(list_runs(root))
    exact = [r for r in runs if r.run_id == ref]
    if exact:
        return exact[0], ""
    if len(ref) < MIN_ID_PART:
        return None, _("{ref!r} is too short to pick a run: give the whole id, or at least {count} of its first or "
                       "last characters (see `mgtutor runs`)").format(ref=ref, count=MIN_ID_PART)
    matches = [r for r in runs if r.run_id.startswith(ref) or r.run_id.endswith(ref)]
    if len(matches) == 1:
        return matches[0], ""
    if matches:
        return None, _("{ref!r} matches {count} runs ({ids}, …): give more of the id").format(
            ref=ref, count=len(matches), ids=_(", ").join(r.run_id for r in matches[:3]))
    return None, _("no single run matches {ref!r} in {folder}").format(ref=ref, folder=root or runs_root())
