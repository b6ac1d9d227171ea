"""Where the suite's CPU goes, by process: with this folder on PYTHONPATH and PROC_CPU_LOG=FILE, every Python
process that exits normally appends one JSON line to FILE (its own CPU seconds, argv, the test that started it,
whether it imported torch, torch._dynamo, torch._inductor, textual). A process killed by a signal or ended by
os._exit writes nothing. tests/bench/proc_cpu.py sums the lines by kind of process."""
import atexit
import json
import os
import sys
import time

_LOG = os.environ.get("PROC_CPU_LOG")
_STARTED = time.time()


def _write() -> None:
    times = os.times()
    mods = sys.modules
    record = {"pid": os.getpid(), "ppid": os.getppid(), "cpu": round(times.user + times.system, 3),
              "wall": round(time.time() - _STARTED, 2), "argv": sys.orig_argv[:4],
              "torch": "torch" in mods, "dynamo": "torch._dynamo" in mods, "inductor": "torch._inductor" in mods,
              "textual": "textual" in mods, "test": os.environ.get("PYTEST_CURRENT_TEST", "")}
    try:
        with open(_LOG, "a", encoding="utf-8") as out:  # type: ignore[arg-type]
            out.write(json.dumps(record) + "\n")
    except OSError:
        pass


if _LOG:
    atexit.register(_write)
