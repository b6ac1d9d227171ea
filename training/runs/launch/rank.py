"""Per-rank wrapper: torchrun starts this once per rank, and it runs the real rank as a child.

Why a wrapper: torchrun does not tell which rank exited how, and its log files move between
versions. The wrapper opens `logs/rank<R>.stdout.log`/`.stderr.log` in the run directory and copies
the child's stdout/stderr into them through pipes (pump.py: nothing is lost if the UI dies, and a
full disk drops output instead of ending the training), and records the child's pid, exit code or
signal, end time and any output it could not write in `ranks/rank<R>.json`.

    python -m mgtutor.training.runs.launch.rank -m some.module ARGS…   |   python -m mgtutor.training.runs.launch.rank SCRIPT ARGS…
"""
from __future__ import annotations

import ctypes
import io
import os
import signal
import subprocess
import sys
import time

from mgtutor.training.runs.launch.disk import DROPPED_KEY, write_json_anyway
from mgtutor.training.runs.launch.pump import LogPump
from mgtutor.training.runs.records.record import RUN_DIR_ENV, RankExit, RunRecord
from mgtutor.training.foundation.safe_io import open_private, private_dir

MEMORY_ENV = "MGTUTOR_MEMORY_HISTORY"  # "1": `mgtutor run --memory` (training/worker/trainer/memory_record.py)
_MEMORY_RECORDER = ["-m", "mgtutor.training.worker.trainer.memory_record"]
_FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)
_PR_SET_PDEATHSIG = 1
DRAIN_S = 3.0  # after the rank's end, how long its output may still come (from a process it left behind)


def _die_with_parent() -> None:
    """If torchrun is SIGKILLed, its workers would run on as orphans; ask for SIGTERM instead."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
    except (OSError, AttributeError):
        pass


def open_rank_logs(record: RunRecord, rank: int) -> tuple[io.FileIO, io.FileIO]:
    """The rank's stdout and stderr log files, 0600, appended to; never through a symlink planted
    where a log or the logs/ folder should be (UnsafePath, an OSError, says so)."""
    logs = private_dir(record.path / "logs")  # a symlinked logs/ is refused, not followed
    out = os.fdopen(open_private(logs / f"rank{rank}.stdout.log", append=True), "ab", buffering=0)
    err = os.fdopen(open_private(logs / f"rank{rank}.stderr.log", append=True), "ab", buffering=0)
    return out, err


def main(argv: list[str]) -> int:
    argv = argv[1:] if argv[:1] == ["--"] else argv  # the launcher's `--` (argparse keeps it before a REMAINDER)
    if not argv:
        print("usage: python -m mgtutor.training.runs.launch.rank (-m MODULE | SCRIPT) [ARGS...]", file=sys.stderr)
        return 2
    parent = os.getppid()
    _die_with_parent()
    if os.getppid() != parent:  # the parent died before prctl took effect
        return 1
    rank = int(os.environ.get("RANK", "0"))
    record = RunRecord(os.environ[RUN_DIR_ENV]) if os.environ.get(RUN_DIR_ENV) else None
    pumps = [LogPump(log) for log in open_rank_logs(record, rank)] if record else []
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    if env.get(MEMORY_ENV) == "1":  # the allocator's history, and a snapshot at an OOM
        argv = [*_MEMORY_RECORDER, *argv]
    child = subprocess.Popen([sys.executable, "-u", *argv], stdout=pumps[0].write_fd if pumps else None,
                             stderr=pumps[1].write_fd if pumps else None, stdin=subprocess.DEVNULL, env=env)
    for pump in pumps:
        pump.start()
    info = RankExit(rank=rank, local_rank=int(os.environ.get("LOCAL_RANK", rank)),
                    node_rank=int(os.environ.get("GROUP_RANK", "0")), world_size=int(os.environ.get("WORLD_SIZE", "1")),
                    pid=child.pid, wrapper_pid=os.getpid(), started=time.time())
    if record:
        write_json_anyway(record.path / "ranks" / f"rank{rank}.json", info.to_json())

    def forward(signum: int, _frame: object) -> None:
        try:
            child.send_signal(signum)
        except ProcessLookupError:
            pass

    for sig in _FORWARDED:
        signal.signal(sig, forward)
    returncode = child.wait()
    info.ended = time.time()
    if returncode < 0:
        info.signal = signal_name(-returncode)
    else:
        info.exit_code = returncode
    if record:
        _finish(record, info, pumps)
    if returncode < 0:
        signal.signal(-returncode, signal.SIG_DFL)
        os.kill(os.getpid(), -returncode)
    return returncode


def _finish(record: RunRecord, info: RankExit, pumps: list[LogPump]) -> None:
    """The rest of the rank's output into its logs, then its exit (and what output was lost) into
    its rank file, also on a full disk."""
    for pump in pumps:
        pump.finish(DRAIN_S)
    dropped = {stream: pump.dropped for stream, pump in zip(("stdout", "stderr"), pumps) if pump.dropped}
    if dropped:
        info.extra[DROPPED_KEY] = {**dropped, "why": next(p.why for p in pumps if p.why)}
    write_json_anyway(record.path / "ranks" / f"rank{info.rank}.json", info.to_json())


def signal_name(signum: int) -> str:
    """SIGTERM, or SIGRTMIN+5 for a real-time signal that has no name of its own."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        rtmin = getattr(signal, "SIGRTMIN", None)
        return f"SIGRTMIN+{signum - int(rtmin)}" if rtmin is not None and signum >= int(rtmin) else f"signal {signum}"


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
