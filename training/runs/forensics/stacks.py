"""Take the Python stack of every process of every rank while a run hangs, and keep it in the run dir.

    capture = capture_stacks(record, reason="stall")      # py-spy where it may attach, else the hook
    capture.path / "rank1.txt"                             # one file per rank: main process + workers

Two ways in, per process: `py-spy dump` (reads the process from outside; needs ptrace rights), or
the stack hook the launcher puts on the ranks' PYTHONPATH (stackhook/sitecustomize.py: faulthandler
on a signal, written to `stacks/live/pid<P>.txt`). A rank that exits meanwhile, a hook that never
loaded, a run dir mgtutor cannot write: the capture says what is missing and why, and never raises.
`native=True` asks py-spy for the native frames too (C/C++: NCCL, CUDA, the autograd engine), marked
`[native]`; that pauses each process while it is read, so it is taken only once a hang is confirmed
(or on request); where it fails the Python stack is taken as usual and the capture says why.
Headless and torch-free.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psutil

from mgtutor.training.runs.forensics.pyspy_text import render_pyspy_json
from mgtutor.training.runs.records.record import RunRecord, carries_run, write_json_atomic
from mgtutor.training.foundation.i18n import N_
from mgtutor.training.foundation.json_decode import parse
from mgtutor.training.foundation.said import Said, in_english, keep
from mgtutor.training.foundation.safe_io import entries, open_regular, private_dir, read_regular, write_private_atomic

HOOK_DIR = Path(__file__).with_name("stackhook")
LIVE_ENV = "MGTUTOR_STACKS_LIVE"
SIGNAL_ENV = "MGTUTOR_STACK_SIGNAL"
METHOD_ENV = "MGTUTOR_STACKS_METHOD"  # auto | py-spy | signal
INSTRUMENT_ENV = "MGTUTOR_INSTRUMENT"  # "1": the hook measures a user's script (stackhook/sitecustomize.py)
PYSPY_ENV = "MGTUTOR_PYSPY"  # the py-spy executable to use (default: the one beside this Python)
PYSPY_TIMEOUT_S = 3.0
NATIVE_TIMEOUT_S = 5.0  # unwinding native frames reads the symbols of the libraries on the stack
SIGNAL_WAIT_S = 1.5


@dataclass
class ProcessStack:
    rank: int
    pid: int
    role: str  # main | worker (a DataLoader worker or another child of the rank)
    method: str | None = None  # py-spy | signal; None when no stack was taken
    native: bool = False  # the text has the native frames too
    text: str = ""
    problem: str | None = None  # why there is no stack, or why the first way failed


@dataclass
class Capture:
    capture_id: str
    path: Path | None
    reason: str
    started: float
    seconds: float = 0.0
    processes: list[ProcessStack] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # one sentence per thing we could not get (a Said)
    rank_env: dict[int, dict[str, str]] = field(default_factory=dict)  # WORLD_SIZE etc. as the ranks see it

    def for_rank(self, rank: int) -> list[ProcessStack]:
        return [p for p in self.processes if p.rank == rank]

    def texts(self) -> dict[int, str]:
        """rank → the text of its rank<R>.txt."""
        return {rank: rank_text(self.for_rank(rank)) for rank in sorted({p.rank for p in self.processes})}

    def index(self) -> dict[str, Any]:
        procs = [{k: v for k, v in asdict(p).items() if k != "text"}
                 | {"file": f"rank{p.rank}.txt", "problem": in_english(p.problem) if p.problem else None}
                 for p in self.processes]
        return {"id": self.capture_id, "reason": self.reason, "started": self.started,
                "seconds": round(self.seconds, 3), "processes": procs,
                "missing": [in_english(m) for m in self.missing], "missing_said": [keep(m) for m in self.missing],
                "rank_env": {str(r): env for r, env in self.rank_env.items()}}


def hook_env(record: RunRecord, base: dict[str, str], instrument: bool = False) -> dict[str, str]:
    """The environment that makes every rank process load the stack hook (the old PYTHONPATH after it).
    `instrument`: the hook also writes `step` events for a user's script; always said ("1" or "0"), so
    a variable left in the caller's environment never instruments mgtutor's own workers twice."""
    path = [str(HOOK_DIR)] + [p for p in base.get("PYTHONPATH", "").split(os.pathsep) if p]
    return {"PYTHONPATH": os.pathsep.join(path), LIVE_ENV: str(record.path / "stacks" / "live"),
            INSTRUMENT_ENV: "1" if instrument else "0"}


# What the hang analysis reads back from a capture's index (in English) to know a rank had exited.
EXITED_BEFORE = N_("rank {rank}: exited ({how}) before the capture")
ROLES = {"main": N_("main"), "worker": N_("worker")}
EXITED_WHILE_TAKEN = N_("the process exited while its stack was taken")


def _role(role: str) -> Said | str:
    return Said(ROLES[role]) if role in ROLES else role


def pyspy_path() -> str | None:
    chosen = os.environ.get(PYSPY_ENV)
    if chosen:
        return chosen
    beside = Path(sysconfig.get_path("scripts")) / "py-spy"
    if beside.is_file():
        return str(beside)
    near = Path(sys.executable).parent / "py-spy"
    return str(near) if near.is_file() else shutil.which("py-spy")


def rank_processes(record: RunRecord) -> tuple[list[tuple[int, int, str]], list[str]]:
    """(rank, pid, role) of every live process of the run's ranks, and what is missing."""
    found: list[tuple[int, int, str]] = []
    missing: list[str] = []
    world = record.meta().world_size
    infos = {i.rank: i for i in record.ranks()}
    for rank in sorted(set(range(world)) | set(infos)):
        info = infos.get(rank)
        if info is None or info.pid is None:
            missing.append(Said(N_("rank {rank}: never started (no ranks/rank{rank}.json)"), rank=rank))
            continue
        if info.ended is not None:
            how = (Said(N_("signal {signal}"), signal=info.signal) if info.signal
                   else Said(N_("exit code {code}"), code=info.exit_code))
            missing.append(Said(EXITED_BEFORE, rank=rank, how=how))
            continue
        try:
            main = psutil.Process(info.pid)
            ours = carries_run(main, record)  # the pid in ranks/rank<R>.json may be a stranger's now
            children = main.children(recursive=True) if ours else []
        except psutil.AccessDenied:
            ours = False
        except psutil.Error:
            missing.append(Said(N_("rank {rank}: process {pid} is gone"), rank=rank, pid=info.pid))
            continue
        if not ours:
            missing.append(Said(N_("rank {rank}: process {pid} is not this run's (its environment does not name "
                                   "run {run}); not signalled"), rank=rank, pid=info.pid, run=record.run_id))
            continue
        found.append((rank, main.pid, "main"))
        found += [(rank, child.pid, "worker") for child in children]
    return found, missing


def capture_stacks(record: RunRecord, reason: str = "on demand", method: str | None = None,
                   save: bool = True, native: bool = False) -> Capture:
    """Every rank process's stack, taken in parallel, saved under stacks/<id>/ when the dir allows
    (`save=False`: kept in memory; `save_capture` writes it later, e.g. only when it shows a hang).
    `native`: with native frames where py-spy can read them (it pauses each process meanwhile)."""
    method = method or os.environ.get(METHOD_ENV, "auto")
    started = time.time()
    t0 = time.monotonic()
    capture = Capture(capture_id=_new_id(record, reason), path=None, reason=reason, started=started)
    targets, capture.missing = rank_processes(record)
    spy = pyspy_path() if method in ("auto", "py-spy") else None
    if method in ("auto", "py-spy") and spy is None:
        capture.missing.append(Said(N_("py-spy is not installed (pip install py-spy); used the stack hook instead")))
    with ThreadPoolExecutor(max_workers=max(1, min(16, len(targets)))) as pool:
        capture.processes = list(pool.map(lambda t: _one(record, t, spy, method, native), targets))
    for proc in capture.processes:
        if proc.method is None:
            capture.missing.append(Said(N_("rank {rank} {role} process {pid}: {problem}"), rank=proc.rank,
                                        role=_role(proc.role), pid=proc.pid, problem=proc.problem))
        elif native and not proc.native and spy is not None:  # without py-spy: said once above
            capture.missing.append(Said(N_("rank {rank} {role} process {pid}: no native frames ({problem})"),
                                        rank=proc.rank, role=_role(proc.role), pid=proc.pid, problem=proc.problem))
    capture.rank_env = _rank_env(capture.processes)
    capture.seconds = time.monotonic() - t0
    if save:
        save_capture(record, capture)
    return capture


def _one(record: RunRecord, target: tuple[int, int, str], spy: str | None, method: str,
         native: bool = False) -> ProcessStack:
    rank, pid, role = target
    stack = ProcessStack(rank=rank, pid=pid, role=role)
    if spy is not None and native:
        text, problem = _pyspy(spy, pid, native=True)
        if text is not None:
            stack.method, stack.text, stack.native = "py-spy", text, True
            return stack
        stack.problem = Said(N_("py-spy --native: {problem}"), problem=problem)  # the Python stack may still come
    if spy is not None:
        text, problem = _pyspy(spy, pid)
        if text is not None:
            stack.method, stack.text = "py-spy", text
            return stack
        stack.problem = _then(stack.problem, Said(N_("py-spy: {problem}"), problem=problem))
        if method == "py-spy" or not psutil.pid_exists(pid):
            return stack
    text, problem = _signal_dump(record, pid)
    if text is not None:
        stack.method, stack.text = "signal", text
        return stack
    stack.problem = _then(stack.problem, Said(N_("stack hook: {problem}"), problem=problem))
    return stack


def _then(first: str | None, then: Said) -> Said:
    return Said(N_("{first}; {then}"), first=first, then=then) if first else then


def _pyspy(spy: str, pid: int, native: bool = False) -> tuple[str | None, str | None]:
    # --nonblocking: reading the stack must not pause a rank that is still working (a quiet rank is not
    # yet a hung one); a hung rank's stack does not change while it is read. Native frames can only be
    # unwound in a paused process (py-spy refuses --native with --nonblocking).
    how, timeout = (["--native"], NATIVE_TIMEOUT_S) if native else (["--nonblocking"], PYSPY_TIMEOUT_S)
    try:
        proc = subprocess.run([spy, "dump", "--pid", str(pid), *how, "--json", "--full-filenames", "--locals"],
                              capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return None, Said(N_("no answer within {seconds:g} s"), seconds=timeout)
    except OSError as exc:
        return None, Said(N_("cannot run {program} ({why})"), program=spy, why=exc.strerror or str(exc))
    if proc.returncode != 0:
        said = " ".join((proc.stderr or proc.stdout).split())[:200]  # py-spy's own words
        message: str = said or Said(N_("exit code {code}"), code=proc.returncode)
        if not psutil.pid_exists(pid):
            message = Said(EXITED_WHILE_TAKEN)
        elif "ermission" in said or "ptrace" in said.lower():
            message = Said(N_("no ptrace rights ({message})"), message=said)
        return None, message
    try:
        return render_pyspy_json(json.loads(proc.stdout)), None
    except (ValueError, TypeError, KeyError) as exc:
        return None, Said(N_("unreadable py-spy output ({error})"), error=str(exc))


def _signal_dump(record: RunRecord, pid: int) -> tuple[str | None, str | None]:
    live = live_dir(record, pid) / f"pid{pid}.txt"
    try:
        before = live.stat().st_size
    except OSError:
        return None, Said(N_("not loaded in this process (no stacks/live file: started outside mgtutor, or the run "
                             "dir is not writable)"))
    signum = _hook_signal(pid)
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        return None, Said(EXITED_WHILE_TAKEN)
    except PermissionError:
        return None, Said(N_("not allowed to signal the process"))
    deadline = time.monotonic() + SIGNAL_WAIT_S
    size = before
    while time.monotonic() < deadline:
        time.sleep(0.02)
        now = _size(live)
        if now > before and now == size:  # grew, then stopped growing: the dump is complete
            break
        size = now
    if size <= before:
        return None, Said(N_("no dump within {seconds:g} s"), seconds=SIGNAL_WAIT_S)
    with open_regular(live) as handle:
        handle.seek(before)
        return handle.read().decode("utf-8", "replace"), None


def live_dir(record: RunRecord, pid: int) -> Path:
    """Where the hook of this process writes: its own environment says (the run dir by default)."""
    try:
        chosen = psutil.Process(pid).environ().get(LIVE_ENV)
    except psutil.Error:
        chosen = None
    return Path(chosen) if chosen else record.path / "stacks" / "live"


def _hook_signal(pid: int) -> int:
    try:
        chosen = psutil.Process(pid).environ().get(SIGNAL_ENV)
    except psutil.Error:
        chosen = None
    if chosen and chosen.isdigit():
        return int(chosen)
    import signal

    return int(signal.SIGRTMIN) + 5 if hasattr(signal, "SIGRTMIN") else int(signal.SIGUSR2)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _rank_env(procs: list[ProcessStack]) -> dict[int, dict[str, str]]:
    """What each rank's environment says about the world (as torchrun set it at start)."""
    out: dict[int, dict[str, str]] = {}
    for proc in procs:
        if proc.role != "main":
            continue
        try:
            env = psutil.Process(proc.pid).environ()
        except psutil.Error:
            continue
        out[proc.rank] = {k: env[k] for k in ("WORLD_SIZE", "RANK", "LOCAL_WORLD_SIZE", "MASTER_PORT") if k in env}
    return out


def _new_id(record: RunRecord, reason: str) -> str:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    slug = "".join(ch if ch.isalnum() else "-" for ch in reason.lower())[:16].strip("-") or "capture"
    taken = {p.name for p in _captures_dir(record).glob(f"{stamp}-*")} if _captures_dir(record).is_dir() else set()
    n = 1
    while f"{stamp}-{n}-{slug}" in taken:
        n += 1
    return f"{stamp}-{n}-{slug}"


def _captures_dir(record: RunRecord) -> Path:
    return record.path / "stacks"


def save_capture(record: RunRecord, capture: Capture) -> None:
    path = _captures_dir(record) / capture.capture_id
    try:
        private_dir(path)
        for rank, text in capture.texts().items():
            write_private_atomic(path / f"rank{rank}.txt", text)
        capture.path = path
        write_json_atomic(path / "index.json", capture.index())
    except OSError as exc:
        capture.path = None
        capture.missing.append(Said(N_("stacks not saved: cannot write {path} ({why})"), path=str(path),
                                    why=exc.strerror or str(exc)))


def rank_text(procs: list[ProcessStack]) -> str:
    """One rank's file: a header line per process, then its stack as the tool printed it."""
    parts = []
    for proc in procs:
        how = proc.method or "none"
        parts.append(f"=== process {proc.pid} (rank {proc.rank}, {proc.role}) via {how} ===\n")
        parts.append(proc.text if proc.method else f"(no stack: {in_english(proc.problem or '')})\n")
    return "".join(parts)


def list_captures(record: RunRecord) -> list[Path]:
    """Saved captures, oldest first (their ids start with the time)."""
    return [p for p in entries(_captures_dir(record)) if _is_capture(p)]


def _is_capture(path: Path) -> bool:
    try:
        return path.is_dir() and (path / "index.json").is_file()
    except OSError:
        return False


def load_index(path: Path) -> dict[str, Any]:
    try:
        data = parse(read_regular(path / "index.json"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
