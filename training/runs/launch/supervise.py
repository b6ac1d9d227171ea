"""The run's supervisor: starts torchrun, waits for it, writes result.json.

It runs in its own session, detached from the UI, so a run started from the TUI goes on (and
still gets its result) when the terminal goes away. `python -m mgtutor.training.runs.launch.supervise RUN_DIR`
"""
from __future__ import annotations

import signal
import stat
import subprocess
import sys
import time
from collections.abc import Callable

from mgtutor.training.runs.launch.disk import DROPPED_KEY, update_meta_anyway, write_json_anyway
from mgtutor.training.runs.records.record import RunRecord, build_result
from mgtutor.training.foundation.safe_io import entries

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def sweep_fifos(record: RunRecord) -> None:
    """The ranks' dump FIFOs (stacks/live/fr_pid*.pipe) end with them: a reader that opened one
    later would wait forever. A rank killed outright could not remove its own."""
    for pipe in entries(record.path / "stacks" / "live", "*.pipe"):
        try:
            if stat.S_ISFIFO(pipe.lstat().st_mode):
                pipe.unlink()
        except OSError:
            continue


def start_unless_stopped(argv: list[str], stopped: Callable[[], bool]) -> subprocess.Popen[bytes] | None:
    """torchrun, unless a stop came first. A stop reaches torchrun through this process group, so one
    that came before torchrun existed would never reach it: the ranks would run on, unstopped. With
    the stop signals held back from the check to the fork, a stop is either seen here (no torchrun)
    or arrives once torchrun is in the group (the child lets them through again before it execs).
    The mask holds for the calling thread only: this holds because the supervisor has no other thread."""
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        if stopped():
            return None
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                preexec_fn=lambda: signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS))
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)


def main(run_dir: str) -> int:
    record = RunRecord(run_dir)
    meta = record.meta()
    stop_requested = False

    def on_stop(_signum: int, _frame: object) -> None:
        nonlocal stop_requested
        stop_requested = True  # torchrun got the same signal from the group; wait for it to finish

    for sig in STOP_SIGNALS:
        signal.signal(sig, on_stop)
    try:
        print(f"[mgtutor] {' '.join(meta.torchrun_argv)}", flush=True)
    except OSError:  # torchrun.log is on a full disk: the run goes on without this line
        pass
    torchrun = start_unless_stopped(meta.torchrun_argv, lambda: stop_requested)
    code = None
    if torchrun is not None:
        update_meta_anyway(record, torchrun_pid=torchrun.pid)
        while True:
            try:
                code = torchrun.wait()
                break
            except InterruptedError:
                continue
    time.sleep(0.05)  # the rank wrappers write their exit records just before torchrun returns
    sweep_fifos(record)
    result = build_result(record, torchrun_exit=code, stopped=stop_requested)
    dropped = {str(info.rank): info.extra[DROPPED_KEY] for info in record.ranks() if DROPPED_KEY in info.extra}
    if dropped:
        result.extra[DROPPED_KEY] = dropped
    write_json_anyway(record.path / "result.json", result.to_json())
    update_meta_anyway(record, ended=time.time(), status=result.status.value)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
