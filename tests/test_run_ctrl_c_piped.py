"""Ctrl+C on `mgtutor run … 2>&1 | while read …` stops every rank, every time (issue 27 item 10).

A terminal's Ctrl+C reaches the whole foreground process group at once: the shell, mgtutor and the
pipe's reader, which usually dies first, so mgtutor's next write meets a closed pipe; the ranks run
in sessions of their own and stop only if mgtutor stops them. Each try sends SIGINT to the group at
another moment: while mgtutor starts, while it launches, while the ranks print. The ranks start through
the torch-free stand-in for torchrun (what is tested is mgtutor's stop, twenty times); Ctrl+C through the
real torchrun: tests/test_cli_run.py::test_ctrl_c_stops_every_rank."""
from __future__ import annotations

import contextlib
import os
import select
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from conftest import no_gpu_env
from mgtutor.training.runs.records.record import list_runs
from tests.helpers import wait_for

TRIES = 20
# Two ranks that print as fast as a terminal reads, forever: only a stop ends them.
CHATTY = "import time\ni = 0\nwhile True:\n    i += 1\n    print('tick', i, flush=True)\n    time.sleep(0.002)\n"
# `python -m mgtutor.tui ARGS`, but SIGUSR1 writes every thread's stack to a file: if mgtutor does not exit
# after Ctrl+C, the failure shows where it waits (its stderr went down the pipe with the reader).
DUMPABLE = ("import faulthandler, runpy, signal, sys\n"
            "faulthandler.register(signal.SIGUSR1, file=open(sys.argv[1], 'w'), all_threads=True)\n"
            "sys.argv = ['mgtutor', *sys.argv[2:]]\n"
            "runpy.run_module('mgtutor.tui', run_name='__main__', alter_sys=True)\n")
EXIT_S = 60  # from Ctrl+C to the pipe's end: a stop takes a few seconds, its worst case (SIGKILL) about 15


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


def read_to_end(shell: subprocess.Popen[bytes], seconds: float) -> bool:
    """Read the pipeline's output until every writer has closed it (True) or `seconds` pass (False)."""
    assert shell.stdout is not None
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        if select.select([shell.stdout], [], [], left)[0] and not os.read(shell.stdout.fileno(), 65536):
            return True
    return False


def still_there(shell: subprocess.Popen[bytes], dump: Path, script: str) -> str:
    """What is left of a pipeline that did not end: its processes and what mgtutor started, mgtutor's own
    stacks, and (where py-spy is installed) the stacks of the rest."""
    left: dict[int, psutil.Process] = {}
    for proc in psutil.process_iter(["pid", "ppid", "cmdline"]):
        if str(dump) in (proc.info["cmdline"] or []) or script in (proc.info["cmdline"] or []) \
                or proc.info["pid"] == shell.pid or proc.info["ppid"] == shell.pid:
            left[proc.pid] = proc
            with contextlib.suppress(psutil.Error):
                left.update({child.pid: child for child in proc.children(recursive=True)})
    lines, spy = [], shutil.which("py-spy")
    for proc in left.values():
        with contextlib.suppress(psutil.Error):
            argv = " ".join(proc.cmdline()).replace(chr(10), " ")
            lines.append(f"  {proc.pid} (parent {proc.ppid()}, {proc.status()}): {argv[:160]}")
            if str(dump) in proc.cmdline():
                proc.send_signal(signal.SIGUSR1)
            elif spy and "python" in argv:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    lines.append(subprocess.run([spy, "dump", "--pid", str(proc.pid)], capture_output=True, text=True,
                                                timeout=20).stdout)
    time.sleep(1.0)
    stacks = dump.read_text(errors="replace") if dump.exists() else "(no stack dump)"
    return "processes left:\n" + "\n".join(lines) + "\nmgtutor's threads:\n" + stacks


def one_try(script: str, delay: float, after_lines: int) -> str:
    """Start the pipeline; after `delay` s (and `after_lines` lines through the reader), Ctrl+C."""
    dump = Path(script).with_name(f"stacks-{delay:.2f}-{after_lines}.txt")
    mgtutor = [sys.executable, "-c", DUMPABLE, str(dump), "run", "--nproc", "2", "--backend", "gloo", "--", script]
    command = shlex.join(mgtutor) + " 2>&1 | while IFS= read -r line; do printf '%s\\n' \"$line\"; done"
    shell = subprocess.Popen(["bash", "-c", command], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             env=no_gpu_env(), start_new_session=True)
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
        if not read_to_end(shell, EXIT_S):
            pytest.fail(f"the pipeline did not end {EXIT_S} s after Ctrl+C ({delay:.2f} s, {after_lines} lines)\n"
                        + still_there(shell, dump, script))
        shell.wait(30)
        wait_for(lambda: group_gone(shell.pid), 60, what="mgtutor to exit after Ctrl+C")
        wait_for(lambda: not ranks_of(script), 30, what=f"every rank to stop (Ctrl+C after {delay:.2f} s, "
                                                         f"{after_lines} lines): {''.join(seen[-5:])}")
    finally:
        if shell.poll() is None:
            os.killpg(shell.pid, signal.SIGKILL)
            shell.wait()
        for proc in ranks_of(script):
            try:
                proc.kill()
            except psutil.NoSuchProcess:  # ended since it was listed
                pass
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
