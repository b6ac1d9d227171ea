"""Ctrl+C on `mgtutor run … 2>&1 | while read …` stops every rank, every time (issue 27 item 10).

A terminal's Ctrl+C reaches the whole foreground process group at once: the shell, mgtutor and the
pipe's reader, which usually dies first, so mgtutor's next write meets a closed pipe; the ranks run
in sessions of their own and stop only if mgtutor stops them. Each try sends SIGINT to the group at
another moment: while mgtutor starts, while it launches, while the ranks print. The ranks start through
the torch-free stand-in for torchrun (what is tested is mgtutor's stop, twenty times); Ctrl+C through the
real torchrun: tests/test_cli_run.py::test_ctrl_c_stops_every_rank."""
from __future__ import annotations

import os
import shlex
import signal
import subprocess
import time

import psutil
import pytest
from conftest import mgtutor_argv, no_gpu_env
from mgtutor.training.runs.records.record import list_runs
from tests.helpers import wait_for

TRIES = 20
# Two ranks that print as fast as a terminal reads, forever: only a stop ends them.
CHATTY = "import time\ni = 0\nwhile True:\n    i += 1\n    print('tick', i, flush=True)\n    time.sleep(0.002)\n"


def default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # as a terminal's foreground job has it


def ranks_of(script: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        if script in (proc.info["cmdline"] or []):
            found.append(proc)
    return found


def group_gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


def one_try(script: str, delay: float, after_lines: int) -> str:
    """Start the pipeline; after `delay` s (and `after_lines` lines through the reader), Ctrl+C."""
    command = (shlex.join(mgtutor_argv("run", "--nproc", "2", "--backend", "gloo", "--", script))
               + " 2>&1 | while IFS= read -r line; do printf '%s\\n' \"$line\"; done")
    shell = subprocess.Popen(["bash", "-c", command], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             env=no_gpu_env(), start_new_session=True, preexec_fn=default_sigint)
    assert shell.stdout is not None
    seen: list[str] = []
    try:
        started = time.monotonic()
        while len([s for s in seen if "tick" in s]) < after_lines:
            line = shell.stdout.readline().decode(errors="replace")
            if not line:
                break
            seen.append(line)
        time.sleep(max(0.0, delay - (time.monotonic() - started)))
        os.killpg(shell.pid, signal.SIGINT)  # what the terminal sends on Ctrl+C
        shell.stdout.read()
        shell.wait(30)
        wait_for(lambda: group_gone(shell.pid), 60, what="mgtutor to exit after Ctrl+C")
        wait_for(lambda: not ranks_of(script), 30, what=f"every rank to stop (Ctrl+C after {delay:.2f} s, "
                                                         f"{after_lines} lines): {''.join(seen[-5:])}")
    finally:
        if shell.poll() is None:
            os.killpg(shell.pid, signal.SIGKILL)
            shell.wait()
        for proc in ranks_of(script):
            proc.kill()
    return "".join(seen)


@pytest.mark.integration
def test_ctrl_c_on_a_piped_run_stops_every_rank_every_time(write_script, standin_torchrun):
    script = str(write_script("chatty.py", CHATTY))
    for attempt in range(TRIES):
        if attempt % 2:  # while the ranks print, a little later each time
            one_try(script, delay=0.05 * (attempt % 7), after_lines=1 + attempt)
        else:  # from mgtutor's start, through its launch
            one_try(script, delay=0.25 * (attempt // 2), after_lines=0)
    runs = list(list_runs())
    assert runs, "no try got as far as a run"
    for record in runs:  # every run that was started ended stopped, none is left going
        assert record.status().terminal, (record.run_id, record.status())
