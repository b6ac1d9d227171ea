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


def freed_when(tmp_path: Path, hooked: bool) -> str:
    script, said = tmp_path / "cycle.py", tmp_path / f"said-{hooked}.txt"
    script.write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", LIVE_ENV)}
    env["RANK"] = "0"
    if hooked:
        env |= {"PYTHONPATH": str(HOOK_DIR), LIVE_ENV: str(tmp_path / "live")}
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
