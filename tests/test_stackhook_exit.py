"""The stack hook collects garbage once at exit, while Python is still whole: a DDP model caught in a
reference cycle is then freed before the interpreter finalizes, where its gloo threads would abort
the process (pytorch#190489). Shown with a real interpreter and a cycle whose object writes, when
it is freed, whether Python was finalizing; the same script without the hook is the control."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from mgtutor.training.runs.forensics.stacks import HOOK_DIR, LIVE_ENV

pytestmark = pytest.mark.integration  # starts interpreters

SCRIPT = """import sys

class Freed:
    def __init__(self, path):
        self.path, self.me = path, self  # a reference cycle: only a garbage collection frees it
    def __del__(self):
        with open(self.path, "w") as handle:
            handle.write("finalizing" if sys.is_finalizing() else "alive")

Freed(sys.argv[1])
"""


def hooked_env(tmp_path: Path) -> dict[str, str]:
    """A rank's environment with only the stack hook on PYTHONPATH (not the suite's), its stacks under tmp_path."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return env | {"RANK": "0", "PYTHONPATH": str(HOOK_DIR), LIVE_ENV: str(tmp_path / "live")}


def hook_signal() -> int:
    from mgtutor.training.runs.forensics.stackhook.sitecustomize import _signal_number

    signum = _signal_number()
    if signum is None:
        pytest.skip("no real-time signals on this platform")
    return signum


def freed_when(tmp_path: Path, hooked: bool) -> str:
    script, said = tmp_path / "cycle.py", tmp_path / f"said-{hooked}.txt"
    script.write_text(SCRIPT)
    if hooked:
        env = hooked_env(tmp_path)
    else:
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", LIVE_ENV)} | {"RANK": "0"}
    done = subprocess.run([sys.executable, str(script), str(said)], env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    return said.read_text()


def test_a_cycle_is_freed_before_python_finalizes_under_the_hook(tmp_path: Path) -> None:
    assert freed_when(tmp_path, hooked=False) == "finalizing"  # what a rank's DDP model meets without it
    assert freed_when(tmp_path, hooked=True) == "alive"


def test_a_real_time_signal_is_named_by_its_offset():
    """A rank ended by the stack hook's signal (SIGRTMIN+5, no name of its own) is recorded, not a crash
    of the rank wrapper ("39 is not a valid Signals" in CI under load)."""
    import signal

    from mgtutor.training.runs.launch.rank import signal_name

    assert signal_name(int(signal.SIGTERM)) == "SIGTERM"
    assert signal_name(int(signal.SIGRTMIN) + 5) == "SIGRTMIN+5"


def test_a_stack_request_during_exit_never_ends_the_process(tmp_path: Path) -> None:
    """The supervisor may ask for stacks just as a rank finishes (a capture that py-spy could not take falls
    back to the hook's signal). A request in the rank's last moments is ignored: faulthandler, finalizing, put
    the signal's default action (end the process) back over the exit handler's SIG_IGN, and a rank that had
    printed its last line was killed by SIGRTMIN+5. Each try below signals an exiting process every 2 ms (the old
    hook: about 4 tries in 10 killed so)."""
    import signal
    import time

    signum, env = hook_signal(), hooked_env(tmp_path)
    script = "import time; print('ready', flush=True); time.sleep(0.05)"
    endings = []
    for _ in range(20):
        with subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE) as proc:
            assert proc.stdout is not None
            proc.stdout.readline()  # the hook is installed before the script runs
            while proc.poll() is None:
                try:
                    os.kill(proc.pid, signum)
                except ProcessLookupError:
                    break
                time.sleep(0.002)
            endings.append(proc.wait())
    assert endings == [0] * 20, [signal.Signals(-c).name if c < 0 and -c in signal.Signals._value2member_map_
                                 else c for c in endings]


def test_stack_requests_reach_the_main_thread_never_the_flight_recorders(tmp_path: Path) -> None:
    """The hook's own thread blocks the stack signal, so a request is never handled there while the main thread
    runs on (or frees its frames at exit: the test above once ended in SIGSEGV while it did). Read from the
    kernel's view of each thread of a hooked process."""
    if not Path("/proc/self/task").is_dir():
        pytest.skip("no /proc here")
    signum, env = hook_signal(), hooked_env(tmp_path)
    script = "import sys, time; print('ready', flush=True); sys.stdin.readline()"
    with subprocess.Popen([sys.executable, "-c", script], env=env, stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE) as proc:
        assert proc.stdout is not None and proc.stdin is not None
        proc.stdout.readline()
        blocked = {}
        for task in Path(f"/proc/{proc.pid}/task").iterdir():
            status = (task / "status").read_text()
            mask = int(next(line for line in status.splitlines() if line.startswith("SigBlk:")).split()[1], 16)
            blocked[int(task.name)] = bool(mask >> (signum - 1) & 1)
        proc.stdin.close()
        assert proc.wait(timeout=30) == 0
    assert blocked.pop(proc.pid) is False  # the main thread takes the requests
    assert blocked and all(blocked.values()), blocked  # the flight recorder's thread never does
