"""What a user sees from the feed of a followed run, through the real CLI on real runs: a two-rank failure
read once and diagnosed last (issues 44 and 45), SIGQUIT (Ctrl+\\) while `mgtutor run` or `runs attach`
follows (issue 46 item 15), a bad line in a live events.jsonl (item 10), and a batch finder's run that
failed in the Monitor (issue 45 item 5). Ranks start through the torch-free stand-in for torchrun; only
the failure test imports torch in its ranks, since the `[rankN]:` prefix is torch's own."""
from __future__ import annotations

import io
import os
import re
import signal
import subprocess

import pytest

from conftest import mgtutor_argv, no_gpu_env
from mgtutor.training.runs.launch.launcher import LaunchSpec, launch
from mgtutor.training.runs.launch.procs import run_processes
from mgtutor.training.runs.records.record import RunStatus, find_run
from mgtutor.tui.commands.run import FollowEnded, stream_run
from mgtutor.tui.screens.monitor import MonitorScreen
from mgtutor.tui.widgets.training_charts import TrainingCharts
from tests.helpers import wait_for, wait_for_app
from tests.monitor_helpers import make_app
from tests.test_run_control import TICKS, kill_leftovers, start_cli, ticking_cli

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("standin_torchrun")]

# Both ranks fail the same way; each prints its traceback before it exits (atexit runs after it), so the
# first to exit does not end the other before its copy is out.
SAME_FAILURE = """
import atexit, time
import torch, torch.distributed as dist
dist.init_process_group("gloo")
atexit.register(time.sleep, 2.0)
dist.barrier()

def step(x):
    return x.view(3, 5)

step(torch.zeros(4, 4))
"""

BAD_LINE = """
import os, time
from mgtutor.training.runs.events.writer import EventWriter
rank = int(os.environ["RANK"])
events = EventWriter.from_env(rank)
events.emit("start", pid=os.getpid())
events.emit("step", step=1, loss=1.5)
if rank == 0:
    with open(os.environ["MGTUTOR_EVENTS"], "a") as raw:
        raw.write('{"rank": 0, "t": %f, "type": "step", "step": 2, "loss": %s}\\n' % (time.time(), "9" * 400))
time.sleep(1.5)  # the follower reads the bad line while the run goes on
events.emit("step", step=3, loss=0.5)
print("after the bad line", flush=True)
"""

FINDER_FAILS = """
import os, sys, time
from mgtutor.training.runs.events.writer import EventWriter
rank = int(os.environ["RANK"])
events = EventWriter.from_env(rank)
events.emit("start", pid=os.getpid())
for batch, fits in ((64, True), (128, False)):
    if rank == 0:
        events.emit("step", kind="maxbatch", batch=batch, fits=fits, peak_bytes=batch << 20, seconds=0.2, phase="fit")
    time.sleep(0.3)
sys.exit(1 if rank == 1 else 0)
"""


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(mgtutor_argv(*args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=300, env=no_gpu_env())


def test_a_two_rank_failure_shows_its_traceback_once_what_failed_first_and_the_diagnosis_last(write_script):
    done = run_cli("run", "--nproc", "2", "--backend", "gloo", "--", str(write_script("same.py", SAME_FAILURE)))
    out = done.stdout
    assert done.returncode == 1, out
    assert "[rank0]:" not in out and "[rank1]:" not in out  # torch's own prefix, under ours
    assert out.count("x.view(3, 5)") == 1, out  # one traceback, under both ranks
    assert "[ranks 0,1] RuntimeError: shape '[3, 5]' is invalid for input of size 16" in out
    tail = out[out.index("run failed"):].splitlines()
    assert re.match(r"run failed: rank [01] failed first \(exit code 1\): RuntimeError: shape '\[3, 5\]'", tail[0])
    assert tail[1].startswith("run record: ") and tail[2].startswith("diagnosis: child_failed")
    assert tail[-1].startswith("  details: mgtutor diagnose "), tail  # the last thing on screen


def test_sigquit_to_mgtutor_run_stops_every_rank_like_ctrl_c(write_script, tmp_path):
    cli_out, run_id = ticking_cli(write_script, tmp_path)
    try:
        os.kill(cli_out.proc.pid, signal.SIGQUIT)  # Ctrl+\ in the terminal
        code, _out, err = cli_out.finish()
    finally:
        kill_leftovers(run_id)
    assert code == 128 + signal.SIGQUIT, err
    assert "stopping every rank" in err and "no process left" in err
    assert not run_processes(run_id)
    assert find_run(run_id).status() == RunStatus.STOPPED


def test_sigquit_to_runs_attach_detaches_and_says_how_to_come_back(write_script, tmp_path):
    run = launch(LaunchSpec(target=[str(write_script("ticks.py", TICKS)), str(tmp_path / "never")], nproc=2,
                            backend="gloo"))
    run_id = run.record.run_id
    try:
        attached = start_cli("runs", "attach", run_id)
        wait_for(lambda: attached.ticks(0) and attached.ticks(1), 90, what="both ranks through attach")
        os.kill(attached.proc.pid, signal.SIGQUIT)
        code, _out, err = attached.finish()
        assert code == 128 + signal.SIGQUIT, err
        assert f"`mgtutor runs attach {run_id}`" in err and run.running()
    finally:
        kill_leftovers(run_id)
        run.wait(60)


def test_a_follow_that_breaks_leaves_the_run_going_and_says_how_to_reach_it(write_script, tmp_path, capsys):
    run = launch(LaunchSpec(target=[str(write_script("ticks.py", TICKS)), str(tmp_path / "never")], nproc=2,
                            backend="gloo"))
    run_id = run.record.run_id

    def broken_view(update) -> None:
        if update.lines:
            raise RuntimeError("a view's bug")

    try:
        with pytest.raises(FollowEnded) as ended:
            stream_run(run, out=io.StringIO(), on_update=broken_view)
        assert ended.value.exit_code == 1 and run.running()
        err = capsys.readouterr().err
        assert "following broke (RuntimeError: a view's bug)" in err and f"`mgtutor runs attach {run_id}`" in err
    finally:
        kill_leftovers(run_id)
        run.wait(60)


def test_a_bad_line_in_a_live_events_file_never_ends_the_follow(write_script):
    done = run_cli("run", "--nproc", "2", "--backend", "gloo", "--", str(write_script("bad.py", BAD_LINE)))
    assert done.returncode == 0, done.stdout
    assert "[rank 0] after the bad line" in done.stdout and "[rank 1] after the bad line" in done.stdout
    assert "run finished" in done.stdout and "Traceback" not in done.stdout


async def test_a_batch_finder_that_failed_says_so_in_the_monitors_charts(write_script, monkeypatch):
    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("m")
        screen = pilot.app.screen
        assert isinstance(screen, MonitorScreen)
        screen.start_run(LaunchSpec(target=[str(write_script("finder.py", FINDER_FAILS))], nproc=2, backend="gloo"))
        await wait_for_app(pilot, lambda: screen.state is not None and screen.state.done, 120, what="the run's end")
        await pilot.pause(0.3)
        charts = screen.query_one(TrainingCharts).render_charts(200).plain
    assert screen.state.phase == "failed"
    assert "the run failed before any training step was recorded, during the batch finder's trial 2" in charts, charts
    assert "waiting" not in charts
