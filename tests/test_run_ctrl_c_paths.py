"""Each way a Ctrl+C on `mgtutor run … | reader` could leave the run going (issue 27 item 10), made
to happen at its exact moment, in this process, on a real 2-rank run:
- the signal lands after the launch and before the follow's handlers (the default handler would
  raise KeyboardInterrupt out of the command);
- a second Ctrl+C lands while the first one's "stopping every rank…" is written (a slow reader:
  the write blocks);
- the reader dies first, so a write meets a closed pipe (BrokenPipeError ended the command);
- a stop that comes before the supervisor started torchrun (torchrun, started after it, never
  heard of it).
The runs start through the torch-free stand-in for torchrun: these are mgtutor's own paths."""
from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
from collections.abc import Iterator

import pytest

from mgtutor.training.runs.launch import supervise
from mgtutor.training.runs.launch.launcher import LaunchSpec, launch
from mgtutor.training.runs.launch.procs import run_processes
from mgtutor.training.runs.records.record import RunStatus, list_runs
from mgtutor.tui.cli import build_parser
from mgtutor.tui.commands import run as run_command

pytestmark = pytest.mark.usefixtures("standin_torchrun")

CHATTY = "import time\ni = 0\nwhile True:\n    i += 1\n    print('tick', i, flush=True)\n    time.sleep(0.005)\n"


@pytest.fixture(autouse=True)
def own_sigint(monkeypatch) -> Iterator[None]:
    """Ctrl+C as a foreground command gets it (a background pytest may have inherited it ignored)."""
    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, old)
    for record in list_runs():  # a failed test must not leave its ranks running
        for proc in run_processes(record.run_id):
            proc.kill()


def ctrl_c() -> None:
    os.kill(os.getpid(), signal.SIGINT)


def assert_every_rank_stopped() -> None:
    runs = list(list_runs())
    assert len(runs) == 1
    assert not run_processes(runs[0].run_id), "ranks left running"
    assert runs[0].status() == RunStatus.STOPPED


def first_rank_line(lines) -> bool:
    return any(rank is not None for rank, _, _ in lines)


@pytest.mark.integration
def test_ctrl_c_between_the_launch_and_the_follow_stops_the_run(write_script, monkeypatch):
    script = str(write_script("chatty.py", CHATTY))
    real = run_command.live_watch

    def watch_then_ctrl_c(args):
        found = real(args)
        ctrl_c()  # the run exists, the follow's handlers are not in place yet
        return found

    monkeypatch.setattr(run_command, "live_watch", watch_then_ctrl_c)
    args = build_parser().parse_args(["run", "--nproc", "2", "--backend", "gloo", "--", script])
    try:
        code = run_command.main(args)
    except KeyboardInterrupt:
        code = None  # the command was cut short: the run is left going
    assert code == 130
    assert_every_rank_stopped()


@pytest.mark.integration
def test_a_second_ctrl_c_while_the_stop_is_announced_is_only_noted(write_script, monkeypatch):
    script = str(write_script("chatty.py", CHATTY))
    real_say, real_lines = run_command.say, run_command._print_lines
    sent = []

    def lines_then_ctrl_c(lines, out):
        real_lines(lines, out)
        if first_rank_line(lines) and not sent:
            sent.append(1)
            ctrl_c()

    def say_with_a_second_ctrl_c(text):
        if "stopping every rank" in text:
            ctrl_c()  # an impatient user, or a reader so slow that this write blocks
        real_say(text)

    monkeypatch.setattr(run_command, "_print_lines", lines_then_ctrl_c)
    monkeypatch.setattr(run_command, "say", say_with_a_second_ctrl_c)
    run = launch(LaunchSpec(target=[script], nproc=2, backend="gloo", label="chatty"))
    try:
        final = run_command.stream_run(run, out=io.StringIO())
    except KeyboardInterrupt:
        final = None
    assert final is not None and final.stopped
    assert_every_rank_stopped()


class ReaderGone(io.StringIO):
    """A pipe whose reader died: every write of a rank's line fails, as on EPIPE; a Ctrl+C follows."""

    def __init__(self) -> None:
        super().__init__()
        self.failed = 0

    def write(self, text: str) -> int:
        if "[rank" in text:
            self.failed += 1
            if self.failed == 20:
                ctrl_c()  # it comes a little after the reader's end
            raise BrokenPipeError(32, "Broken pipe")
        return super().write(text)


@pytest.mark.integration
def test_a_closed_pipe_does_not_end_the_follow_and_ctrl_c_still_stops(write_script):
    script = str(write_script("chatty.py", CHATTY))
    run = launch(LaunchSpec(target=[script], nproc=2, backend="gloo", label="chatty"))
    out = ReaderGone()
    try:
        final = run_command.stream_run(run, out=out)
    except (BrokenPipeError, KeyboardInterrupt):
        final = None
    assert final is not None and final.stopped and out.failed >= 20
    assert_every_rank_stopped()


def test_a_stop_before_torchrun_starts_means_no_torchrun():
    assert supervise.start_unless_stopped([sys.executable, "-c", "pass"], lambda: True) is None


# Run in a process of its own, single-threaded like the supervisor: the mask is per thread, and a
# thread left in pytest's process by an earlier test would take the signal before the fork.
_STOP_DURING_START = """
import os, signal, sys
import psutil
from mgtutor.training.runs.launch import supervise
seen = []
signal.signal(signal.SIGTERM, lambda *_: seen.append(len(psutil.Process().children())))
def not_yet():
    os.kill(os.getpid(), signal.SIGTERM)
    return False
child = supervise.start_unless_stopped([sys.executable, "-c", "import time; time.sleep(30)"], not_yet)
try:
    print(child is not None, seen, flush=True)
finally:
    child.kill()
    child.wait()
"""


@pytest.mark.integration
def test_a_stop_during_the_start_arrives_once_torchrun_exists():
    """The signal comes between the check and the fork: it is held until the child is there, so a
    stop sent to the group reaches it (here: the handler runs only after the child exists)."""
    done = subprocess.run([sys.executable, "-c", _STOP_DURING_START], capture_output=True, text=True,
                          timeout=60, start_new_session=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True [1]"  # delivered after the fork, not before it


@pytest.mark.integration
def test_the_started_child_does_not_hold_back_the_stop_signals(tmp_path):
    mask = tmp_path / "mask"
    child = supervise.start_unless_stopped(
        [sys.executable, "-c", "import signal, sys; open(sys.argv[1], 'w').write("
         "repr(sorted(signal.pthread_sigmask(signal.SIG_BLOCK, []))))", str(mask)], lambda: False)
    assert child is not None and child.wait(30) == 0
    assert mask.read_text() == "[]"  # torchrun can be stopped like any process
