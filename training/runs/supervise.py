"""The run's supervisor: starts torchrun, waits for it, writes result.json.

It runs in its own session, detached from the UI, so a run started from the TUI goes on (and
still gets its result) when the terminal goes away. `python -m mgtutor.training.runs.supervise RUN_DIR`
"""
from __future__ import annotations

import signal
import stat
import subprocess
import sys
import time

from mgtutor.training.runs.records import RunRecord, build_result
from mgtutor.training.runs.safe_io import entries


def sweep_fifos(record: RunRecord) -> None:
    """The ranks' dump FIFOs (stacks/live/fr_pid*.pipe) end with them: a reader that opened one
    later would wait forever. A rank killed outright could not remove its own."""
    for pipe in entries(record.path / "stacks" / "live", "*.pipe"):
        try:
            if stat.S_ISFIFO(pipe.lstat().st_mode):
                pipe.unlink()
        except OSError:
            continue


def main(run_dir: str) -> int:
    record = RunRecord(run_dir)
    meta = record.meta()
    stop_requested = False

    def on_stop(_signum: int, _frame: object) -> None:
        nonlocal stop_requested
        stop_requested = True  # torchrun got the same signal from the group; wait for it to finish

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, on_stop)
    print(f"[mgtutor] {' '.join(meta.torchrun_argv)}", flush=True)
    torchrun = subprocess.Popen(meta.torchrun_argv, stdin=subprocess.DEVNULL)
    record.update_meta(torchrun_pid=torchrun.pid)
    while True:
        try:
            code = torchrun.wait()
            break
        except InterruptedError:
            continue
    time.sleep(0.05)  # the rank wrappers write their exit records just before torchrun returns
    sweep_fifos(record)
    result = build_result(record, torchrun_exit=code, stopped=stop_requested)
    record.write_result(result)
    record.update_meta(ended=time.time(), status=result.status)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
