"""Run control from any terminal (issue 16): signals to the CLI, `runs stop` / `runs attach`, who is
watching a run, and torchrun's own tracebacks folded to one line.

The fast tests write run directories and signal this process only; the integration tests run
real 2-rank gloo jobs and the real CLI, and signal it as a terminal, `kill` or `timeout` would.
"""
from __future__ import annotations

import json
import os
import pty
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from string import Template

import psutil
import pytest

from conftest import mgtutor_argv, no_gpu_env
from mgtutor.training.runs.launch.control import Interrupted, deferred, follow_signals
from mgtutor.training.runs.launch.launcher import LaunchSpec, launch, torchrun_argv
from mgtutor.training.runs.launch.procs import run_processes
from mgtutor.training.runs.records.record import RunMeta, RunRecord, RunResult, RunStatus, find_run, list_runs
from mgtutor.training.runs.follow.session import RunSession
from mgtutor.training.runs.follow.torchrun_fold import TorchrunFolder
from mgtutor.training.runs.follow.heartbeats import STALE_S, live_watchers, watchers_dir
from tests.helpers import wait_for

SITE = "/usr/lib/python3.11/site-packages"
CHILD_FAILED = f"""E1201 09:57:11.030000 28170 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: 3) local_rank: 1 (pid: 28202) of binary: /usr/bin/python3
Traceback (most recent call last):
  File "<frozen runpy>", line 198, in _run_module_as_main
  File "{SITE}/torch/distributed/run.py", line 1142, in <module>
    main()
  File "{SITE}/torch/distributed/elastic/multiprocessing/errors/__init__.py", line 380, in wrapper
    return f(*args, **kwargs)
           ^^^^^^^^^^^^^^^^^^
  File "{SITE}/torch/distributed/launcher/api.py", line 386, in launch_agent
    raise ChildFailedError(
torch.distributed.elastic.multiprocessing.errors.ChildFailedError: 
============================================================
mgtutor.training.runs.launch.rank FAILED
------------------------------------------------------------
Failures:
[1]:
  time      : 2026-12-01_09:57:11
  host      : localhost
  rank      : 0 (local_rank: 0)
  exitcode  : -15 (pid: 28201)  (SIGTERM)
  error_file: <N/A>
  traceback : Signal 15 (SIGTERM) received by PID 28201
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-12-01_09:57:11
  host      : localhost
  rank      : 1 (local_rank: 1)
  exitcode  : 3 (pid: 28202) 
  error_file: <N/A>
  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html
============================================================""".splitlines()

SIGNAL_CHAIN = f"""W1201 09:57:27.432000 28274 torch/distributed/elastic/agent/server/api.py:753] Received 15 death signal, shutting down workers
Traceback (most recent call last):
  File "{SITE}/torch/distributed/elastic/agent/server/api.py", line 745, in run
    result = self._invoke_run(role)
  File "{SITE}/torch/distributed/elastic/multiprocessing/api.py", line 86, in _terminate_process_handler
    raise SignalException(f"Process {{os.getpid()}} got signal: {{sigval}}", sigval=sigval)
torch.distributed.elastic.multiprocessing.api.SignalException: Process 28274 got signal: 15

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "<frozen runpy>", line 198, in _run_module_as_main
  File "{SITE}/torch/distributed/elastic/multiprocessing/api.py", line 86, in _terminate_process_handler
    raise SignalException(f"Process {{os.getpid()}} got signal: {{sigval}}", sigval=sigval)
torch.distributed.elastic.multiprocessing.api.SignalException: Process 28274 got signal: 15""".splitlines()

NOT_TORCHRUNS = """Traceback (most recent call last):
  File "/opt/tools/wrapper.py", line 3, in <module>
    open("/nonexistent")
FileNotFoundError: [Errno 2] No such file or directory: '/nonexistent'""".splitlines()


def fold_in_pieces(lines: list[str], piece: int) -> list[str]:
    """As the follow loop sees a log: a few lines per poll, the end only when the run is over."""
    folder = TorchrunFolder()
    out: list[str] = []
    for start in range(0, len(lines), piece):
        out += folder.feed(lines[start:start + piece])
    return out + folder.flush()


@pytest.mark.parametrize("piece", [1, 7, 1000])
def test_childfailederror_becomes_one_line_naming_the_failed_rank(piece: int) -> None:
    lines = ["[mgtutor] python -m torch.distributed.run …", *CHILD_FAILED, "after the block"]
    out = fold_in_pieces(lines, piece)
    assert out == ["[mgtutor] python -m torch.distributed.run …", CHILD_FAILED[0],
                   "torchrun reported the failure of rank 1 (exit code 3); "
                   f"its traceback ({len(CHILD_FAILED) - 1} lines) is in torchrun.log",
                   "after the block"]


@pytest.mark.parametrize("piece", [1, 3, 1000])
def test_a_chained_signal_traceback_becomes_one_line(piece: int) -> None:
    out = fold_in_pieces(SIGNAL_CHAIN, piece)
    assert out == [SIGNAL_CHAIN[0], f"torchrun stopped on SIGTERM; its traceback ({len(SIGNAL_CHAIN) - 1} lines) "
                                    "is in torchrun.log"]


def test_a_traceback_that_is_not_torchruns_is_passed_on_whole() -> None:
    assert fold_in_pieces(["before", *NOT_TORCHRUNS, "after"], 2) == ["before", *NOT_TORCHRUNS, "after"]


def _ended_record(tmp_path: Path, torchrun_log: list[str], rank1_err: str) -> RunRecord:
    record = RunRecord.create("fold", tmp_path)
    record.write_meta(RunMeta(run_id=record.run_id, world_size=2, backend="gloo", started=1.0))
    record.torchrun_log.write_text("\n".join(torchrun_log) + "\n")
    record.rank_log(1, "stderr").write_text(rank1_err)
    record.write_result(RunResult(run_id=record.run_id, status=RunStatus.FAILED, world_size=2))
    return record


def test_the_session_folds_torchruns_lines_only_and_verbose_keeps_them(tmp_path: Path) -> None:
    rank_traceback = 'Traceback (most recent call last):\n  File "train.py", line 9, in <module>\nValueError: bad batch\n'
    record = _ended_record(tmp_path, CHILD_FAILED, rank_traceback)

    def lines(verbose: bool) -> list[tuple[int | None, str]]:
        updates = RunSession(record, alive=lambda: False, verbose=verbose, watcher=None).updates()
        return [(rank, text) for update in updates for rank, _stream, text in update.lines]

    folded = lines(verbose=False)
    assert (None, "Traceback (most recent call last):") not in folded
    assert (None, "torchrun reported the failure of rank 1 (exit code 3); "
                  f"its traceback ({len(CHILD_FAILED) - 1} lines) is in torchrun.log") in folded
    assert [text for rank, text in folded if rank == 1] == rank_traceback.splitlines()  # the rank's own: whole
    assert [text for rank, text in lines(verbose=True) if rank is None] == CHILD_FAILED


def _live_record(tmp_path: Path) -> RunRecord:
    record = RunRecord.create("watched", tmp_path)
    record.write_meta(RunMeta(run_id=record.run_id, world_size=1, backend="gloo", started=time.time()))
    return record


def test_a_following_session_keeps_a_heartbeat_and_takes_it_away(tmp_path: Path) -> None:
    record = _live_record(tmp_path)
    assert live_watchers(record) == []
    session = RunSession(record, alive=lambda: True, watcher="mgtutor run")
    session.poll()
    (watcher,) = live_watchers(record)
    assert watcher.pid == os.getpid() and watcher.what == "mgtutor run"
    session.close()  # detached: the run goes on, nobody watches
    assert live_watchers(record) == [] and not list(watchers_dir(record).iterdir())
    RunSession(record, alive=lambda: True, watcher=None).poll()
    assert live_watchers(record) == []


def test_a_stale_heartbeat_or_a_dead_watcher_counts_for_nothing(tmp_path: Path) -> None:
    record = _live_record(tmp_path)
    watchers_dir(record).mkdir()
    now = time.time()
    (watchers_dir(record) / "1-1.json").write_text(json.dumps(
        {"pid": os.getpid(), "host": os.uname().nodename, "what": "x", "since": now, "t": now - STALE_S - 1}))
    assert live_watchers(record, now) == []
    dead = 2 ** 22 + 12345  # above the kernel's pid_max: no process has it
    (watchers_dir(record) / "2-1.json").write_text(json.dumps(
        {"pid": dead, "host": os.uname().nodename, "what": "x", "since": now, "t": now}))
    assert live_watchers(record, now) == []


def test_a_reused_supervisor_pid_is_no_live_run(tmp_path: Path) -> None:
    """meta.json's pid now belongs to another process (pid 1, made long before the run): the run is
    lost, not running, and nothing that stops the run may signal that process."""
    record = _live_record(tmp_path)
    record.update_meta(supervisor_pid=1)
    assert record.supervisor_pid() is None
    assert record.status() == RunStatus.LOST


def test_sigterm_and_sighup_become_interrupted_and_an_ignored_signal_stays_ignored() -> None:
    before = signal.getsignal(signal.SIGTERM)
    for sig, detach in ((signal.SIGTERM, False), (signal.SIGHUP, True), (signal.SIGINT, False)):
        with pytest.raises(Interrupted) as caught, follow_signals() as noted:
            os.kill(os.getpid(), sig)
            assert noted.signum == sig  # the handler noted it and raised nothing
            noted.check()  # the follow loop's next turn raises it
        assert caught.value.signum == sig and caught.value.detach is detach
        assert caught.value.exit_code == 128 + sig and isinstance(caught.value, KeyboardInterrupt)
    assert signal.getsignal(signal.SIGTERM) is before
    old = signal.signal(signal.SIGHUP, signal.SIG_IGN)  # as under nohup
    try:
        with follow_signals() as noted:
            os.kill(os.getpid(), signal.SIGHUP)
            noted.check()
        with follow_signals(), deferred() as later:
            os.kill(os.getpid(), signal.SIGTERM)
        assert later.signals == [signal.SIGTERM]
    finally:
        signal.signal(signal.SIGHUP, old)


def test_a_signal_between_a_locks_acquire_and_its_try_leaves_the_lock_free() -> None:
    """Popen.poll takes its waitpid lock, then enters the `try` that frees it. A handler that raised there
    left the lock taken, and the stop's Popen.wait() blocked on it for ever (a piped `mgtutor run`, Ctrl+C)."""
    lock = threading.Lock()
    with pytest.raises(Interrupted), follow_signals() as caught:
        if lock.acquire(False):
            os.kill(os.getpid(), signal.SIGINT)  # the handler runs here, before the try
            try:
                pass
            finally:
                lock.release()
        caught.check()
    assert not lock.locked()


def test_a_signal_that_lands_in_a_finalizer_is_noted_not_dropped() -> None:
    class Freed:
        def __del__(self) -> None:
            os.kill(os.getpid(), signal.SIGTERM)  # the handler runs inside __del__

    dropped: list[type[BaseException] | None] = []
    hook, sys.unraisablehook = sys.unraisablehook, lambda unraisable: dropped.append(unraisable.exc_type)
    try:
        with pytest.raises(Interrupted) as got, follow_signals() as caught:
            Freed()
            assert dropped == []  # nothing was raised where it landed, so nothing was lost
            caught.check()  # the follow loop's next turn raises it
    finally:
        sys.unraisablehook = hook
    assert got.value.signum == signal.SIGTERM


def test_the_script_gets_its_arguments_as_given_through_torchruns_template() -> None:
    target = ["/tmp/s$.py", "a$$b", "$HOME", "${local_rank}", "plain"]
    argv = torchrun_argv(target, 2, 29500, "rid")
    module = argv.index("mgtutor.training.runs.launch.rank")
    assert argv[module + 1] == "--"  # torchrun parses none of them (test_script_args.py runs it for real)
    passed = argv[module + 2:]
    assert [Template(arg).safe_substitute(local_rank="1") for arg in passed] == target  # what torchrun does


# ---- real runs ---------------------------------------------------------------------------------

TICKS = """
import os, pathlib, sys, time
rank, flag = os.environ["RANK"], pathlib.Path(sys.argv[1])
i = 0
while True:
    print(f"tick {i}", flush=True)
    i += 1
    if rank == "1" and flag.exists():
        sys.exit(3)
    time.sleep(0.2)
"""


class Output:
    """A subprocess's stdout and stderr, read by threads as they come (nothing blocks the test)."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc, self.out, self.err = proc, [], []
        self.readers = [threading.Thread(target=lambda s=stream, i=into: i.extend(iter(s.readline, "")), daemon=True)
                        for stream, into in ((proc.stdout, self.out), (proc.stderr, self.err))]
        for reader in self.readers:
            reader.start()

    def ticks(self, rank: int) -> list[int]:
        prefix = f"[rank {rank}] tick "
        return [int(line[len(prefix):]) for line in list(self.out) if line.startswith(prefix)]

    def finish(self, timeout: float = 120) -> tuple[int, str, str]:
        code = self.proc.wait(timeout)
        for reader in self.readers:
            reader.join(timeout)  # the pipes close with the process: the last lines are in
        return code, "".join(self.out), "".join(self.err)


def start_cli(*args: str) -> Output:
    proc = subprocess.Popen(mgtutor_argv(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=no_gpu_env(), start_new_session=True)
    return Output(proc)


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(mgtutor_argv(*args), capture_output=True, text=True, timeout=120, env=no_gpu_env())


def listed(run_id: str) -> dict:
    return next(r for r in json.loads(cli("runs", "list", "--json").stdout) if r["id"] == run_id)


def the_run_id() -> str:
    """The id of the one run the CLI under test started (each test has its own runs directory)."""
    return wait_for(lambda: next((r.run_id for r in list_runs()), None), 60, what="the run record")


def kill_leftovers(run_id: str) -> None:
    for proc in run_processes(run_id):
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            pass


def ticking_cli(write_script, tmp_path: Path) -> tuple[Output, str]:
    """`mgtutor run` on 2 ranks that print a line every 0.2 s, once both ranks' lines come through."""
    cli_out = start_cli("run", "--nproc", "2", "--", str(write_script("ticks.py", TICKS)), str(tmp_path / "never"))
    run_id = the_run_id()
    try:
        wait_for(lambda: cli_out.ticks(0) and cli_out.ticks(1), 90, what="both ranks ticking")
    except BaseException:
        kill_leftovers(run_id)
        raise
    return cli_out, run_id


@pytest.mark.integration
def test_sigterm_to_mgtutor_run_stops_every_rank_like_ctrl_c(write_script, tmp_path: Path) -> None:
    cli_out, run_id = ticking_cli(write_script, tmp_path)
    try:
        os.kill(cli_out.proc.pid, signal.SIGTERM)  # kill, timeout, CI cancellation, docker stop
        code, out, err = cli_out.finish()
    finally:
        kill_leftovers(run_id)
    assert code == 143, err
    assert "no process left" in err
    assert not run_processes(run_id)
    assert find_run(run_id).status() == RunStatus.STOPPED
    assert "Traceback" not in out + err and "torchrun stopped on SIGTERM" in out


@pytest.mark.integration
def test_sighup_detaches_and_runs_stop_ends_the_detached_run(write_script, tmp_path: Path, standin_torchrun) -> None:
    cli_out, run_id = ticking_cli(write_script, tmp_path)
    try:
        assert listed(run_id)["detached"] is False  # the CLI watches it
        os.kill(cli_out.proc.pid, signal.SIGHUP)  # the terminal went away
        code, _out, err = cli_out.finish()
        assert code == 129
        assert f"the run goes on: `mgtutor runs attach {run_id}` / `mgtutor runs stop {run_id}`" in err
        assert find_run(run_id).status() == RunStatus.RUNNING and run_processes(run_id)
        entry = listed(run_id)
        assert entry["status"] == "running" and entry["detached"] is True
        assert "running, detached" in cli("runs").stdout
        stopped = cli("runs", "stop", run_id)
    finally:
        kill_leftovers(run_id)
    assert stopped.returncode == 0, stopped.stderr
    assert "no process of the run is left" in stopped.stdout
    assert not run_processes(run_id)
    assert find_run(run_id).status() == RunStatus.STOPPED
    again = json.loads(cli("runs", "stop", run_id, "--json").stdout)
    assert again == {"run_id": run_id, "was": "stopped", "status": "stopped", "signalled": 0, "killed": [],
                     "survivors": [], "clean": True}


@pytest.mark.integration
def test_a_terminal_that_goes_away_leaves_the_run_going_detached(write_script, tmp_path: Path, standin_torchrun) -> None:
    """The real thing behind SIGHUP: the CLI's terminal (a pty) closes under it."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: the CLI on the pty, as in a terminal window
        try:
            os.execve(sys.executable, mgtutor_argv("run", "--nproc", "2", "--", str(write_script("ticks.py", TICKS)),
                                                   str(tmp_path / "never")), no_gpu_env())
        finally:
            os._exit(127)
    screen = bytearray()
    try:
        wait_for(lambda: _read_more(fd, screen).count(b"] tick") >= 4, 90, what="ticks on the pty")
    finally:
        os.close(fd)  # the terminal window is closed
    _, status = os.waitpid(pid, 0)
    run_id = the_run_id()
    try:
        assert os.waitstatus_to_exitcode(status) == 128 + signal.SIGHUP
        assert find_run(run_id).status() == RunStatus.RUNNING and run_processes(run_id)
        assert listed(run_id)["detached"] is True
    finally:
        assert cli("runs", "stop", run_id).returncode == 0
        kill_leftovers(run_id)


def _read_more(fd: int, screen: bytearray) -> bytearray:
    """What the terminal shows so far (a pty's output must be read or the CLI blocks on it)."""
    ready, _, _ = select.select([fd], [], [], 0.2)
    if ready:
        screen += os.read(fd, 65536)
    return screen


@pytest.mark.integration
def test_attach_follows_a_detached_run_then_prints_its_end(write_script, tmp_path: Path) -> None:
    flag = tmp_path / "fail-now"
    run = launch(LaunchSpec(target=[str(write_script("ticks.py", TICKS)), str(flag)], nproc=2, backend="gloo"))
    run_id = run.record.run_id
    try:
        tick_log = run.record.rank_log(0, "stdout")
        wait_for(lambda: tick_log.exists() and tick_log.read_text().count("tick") >= 3, 90, what="rank 0 ticking")
        assert listed(run_id)["detached"] is True  # launched, and nobody follows it
        before = tick_log.read_text().count("tick")

        first = start_cli("runs", "attach", run_id)
        wait_for(lambda: len(first.ticks(0)) >= 2 and first.ticks(1), 60, what="new lines through attach")
        assert min(first.ticks(0)) >= before - 1  # new lines, not the log from its start
        assert wait_for(lambda: listed(run_id)["detached"] is False, 30, what="the attached heartbeat")
        os.kill(first.proc.pid, signal.SIGINT)  # Ctrl+C detaches; the run goes on
        code, _out, err = first.finish()
        assert code == 130 and f"mgtutor runs attach {run_id}" in err
        assert run.running() and listed(run_id)["detached"] is True

        second = start_cli("runs", "attach", run_id)
        wait_for(lambda: second.ticks(1), 60, what="attached again")
        flag.touch()  # rank 1 exits 3: the run fails while attached
        code, out, err = second.finish()
    finally:
        kill_leftovers(run_id)
        run.wait(60)  # the supervisor is this test's child: reap it
    assert code == 3, err
    assert "run failed: rank 1 failed first (exit code 3)" in err and "diagnosis: child_failed (rank 1)" in err
    assert "torchrun reported the failure of rank 1 (exit code 3)" in out
    assert "Traceback" not in out + err
    assert out.splitlines()[-1] == f"run record: {run.record.path}"


@pytest.mark.integration
def test_attach_with_stop_stops_the_run_on_sigterm(write_script, tmp_path: Path, standin_torchrun) -> None:
    run = launch(LaunchSpec(target=[str(write_script("ticks.py", TICKS)), str(tmp_path / "never")], nproc=2,
                            backend="gloo"))
    run_id = run.record.run_id
    try:
        attached = start_cli("runs", "attach", "--stop", run_id)
        wait_for(lambda: attached.ticks(0) and attached.ticks(1), 90, what="both ranks through attach")
        os.kill(attached.proc.pid, signal.SIGTERM)
        code, out, err = attached.finish()
    finally:
        kill_leftovers(run_id)
        run.wait(60)
    assert code == 143, err
    assert not run_processes(run_id)
    assert find_run(run_id).status() == RunStatus.STOPPED
    assert "Traceback" not in out + err


@pytest.mark.integration
async def test_the_monitor_keeps_a_heartbeat_and_shows_torchruns_failure_in_one_line(write_script, tmp_path: Path,
                                                                                     monkeypatch) -> None:
    from mgtutor.tui.app import MgTutorApp
    from mgtutor.tui.widgets.rank_logs import TORCHRUN, RankLogs
    from tests.helpers import wait_for_app
    from tests.monitor_helpers import attach_in_monitor

    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")
    flag = tmp_path / "fail-now"
    run = launch(LaunchSpec(target=[str(write_script("ticks.py", TICKS)), str(flag)], nproc=2, backend="gloo"))
    try:
        app = MgTutorApp()
        async with app.run_test(size=(110, 45)) as pilot:
            screen = await attach_in_monitor(pilot, run.record, run)
            await wait_for_app(pilot, lambda: live_watchers(run.record), 60, what="the Monitor's heartbeat")
            assert live_watchers(run.record)[0].pid == os.getpid()
            flag.touch()
            await wait_for_app(pilot, lambda: screen.state is not None and screen.state.done, 120, what="the end")
            await pilot.pause(0.3)
            torchrun = list(screen.query_one(RankLogs).buffers[TORCHRUN].lines)
    finally:
        kill_leftovers(run.record.run_id)
        run.wait(60)
    assert any("torchrun reported the failure of rank 1 (exit code 3)" in line for line in torchrun), torchrun
    assert not [line for line in torchrun if "Traceback" in line or "ChildFailedError" in line]
    assert live_watchers(run.record) == []  # the run ended: nobody watches it any more
