"""Ranks that retry a rendezvous store nobody answers, in a real run on 2 gloo ranks: the DDP tutorial's
mp.spawn script under `mgtutor run` (its children join the script's port as clients; a loopback socket
that accepts and closes holds it). `mgtutor run` names it live, as an unreachable store with the script's
lines, while the ranks still retry, and so does the Monitor attached to that run; `mgtutor diagnose` names it
afterwards; the fix it gives trains.

The runs stay on the real torchrun and 2 ranks: the children join as clients because they inherit torchrun's
TORCHELASTIC_USE_AGENT_STORE (the stand-in sets none), and on one rank the script's world size of 2 no longer
matches the launch, which the diagnosis then names first. `mgtutor diagnose` goes through the CLI's main in process."""
from __future__ import annotations

import asyncio
import queue
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from conftest import mgtutor_argv, no_gpu_env
from tests.userscript_cli import in_process
from mgtutor.training.runs.net.ports import free_port

pytestmark = pytest.mark.integration  # starts torchrun

DATA = Path(__file__).parent / "data" / "run_failures" / "spawn_under_torchrun"
WARNING = "warning (rendezvous_unreachable)"


@contextmanager
def store_that_drops() -> Iterator[int]:
    """A loopback port whose listener accepts every connection and closes it at once."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    listener.settimeout(0.2)
    done = threading.Event()

    def serve() -> None:
        while not done.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        done.set()
        thread.join()
        listener.close()


def script_with_port(tmp_path: Path, port: int) -> Path:
    work = tmp_path / "spawn"
    shutil.copytree(DATA, work)
    script = work / "train.py"
    script.write_text(script.read_text().replace('"12355"', f'"{port}"'))
    return script


def lines_of(proc: subprocess.Popen[str]) -> queue.Queue[str]:
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line.rstrip("\n"))

    threading.Thread(target=pump, daemon=True).start()
    return lines


def until(lines: queue.Queue[str], needle: str, limit_s: float) -> tuple[list[str], str | None]:
    seen: list[str] = []
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        try:
            line = lines.get(timeout=0.5)
        except queue.Empty:
            continue
        seen.append(line)
        if needle in line:
            return seen, line
    return seen, None


def line_of(path: Path, text: str) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def follow_until_warned(script: Path, *more: str, while_warned: Callable[[], None] | None = None,
                        env: dict[str, str] | None = None) -> tuple[list[str], str, str]:
    """`mgtutor run` of the script until its warning (then each of `more`) is printed, while the ranks still wait;
    then `while_warned` (the run still going), then Ctrl+C. (every line seen, the warning, the run record's path)"""
    proc = subprocess.Popen(mgtutor_argv("run", "--nproc", "2", "--", "train.py"), cwd=script.parent,
                            env=env or no_gpu_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    lines = lines_of(proc)
    try:
        seen, warning = until(lines, WARNING, 240)
        assert warning is not None, "\n".join(seen[-40:])
        assert proc.poll() is None  # named while the ranks still wait (torch's own timeout is 30 min)
        for needle in more:
            seen += until(lines, needle, 60)[0]
        if while_warned is not None:
            while_warned()
            assert proc.poll() is None
    finally:
        proc.send_signal(signal.SIGINT)  # Ctrl+C: mgtutor stops every rank
        rest, _ = until(lines, "run record:", 90)
        proc.wait(timeout=60)
    record = next(line for line in seen + rest if line.startswith("run record:")).split(": ", 1)[1]
    return seen, warning, record


def diagnosed_first(capsys: pytest.CaptureFixture[str], record: str) -> str:
    """`mgtutor diagnose` of the run record: its output, once it is checked to name the unreachable store first."""
    _, diagnosed = in_process(capsys, "diagnose", record)
    first = re.search(r"1\. (\w+)", diagnosed)
    assert first and first[1] == "rendezvous_unreachable", diagnosed
    return diagnosed


async def monitors_banner_on_the_run() -> str:
    """The Monitor attached to the run `mgtutor run` follows (found in the run directories, as the Runs screen
    finds it): its alert banner's text, once it names the unreachable store while the run still waits."""
    from mgtutor.training.runs.records.record import list_runs
    from mgtutor.tui.widgets.run_state import AlertBanner
    from tests.helpers import wait_for_app
    from tests.monitor_helpers import attach_in_monitor, make_app

    (record,) = list_runs()
    app = make_app()
    async with app.run_test(size=(110, 45)) as pilot:
        screen = await attach_in_monitor(pilot, record)
        banner = screen.query_one(AlertBanner)
        await wait_for_app(pilot, lambda: any(a.kind == "rendezvous_unreachable" for a in banner.alerts), 240,
                           what="the unreachable store's alert")
        await pilot.pause(0.2)
        assert not screen.state.done and banner.has_class("-visible")
        return banner.plain


@pytest.mark.slow
def test_ranks_retrying_a_store_nobody_hosts_are_named_live_then_by_diagnose(tmp_path, monkeypatch, capsys):
    """`mgtutor run` names it live; the Monitor, attached to the same run while it waits, says it in its alert
    banner with the script's lines; `mgtutor diagnose` names it afterwards."""
    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")
    shown: list[str] = []
    with store_that_drops() as port:
        script = script_with_port(tmp_path, port)
        seen, warning, record = follow_until_warned(
            script, while_warned=lambda: shown.append(asyncio.run(monitors_banner_on_the_run())))
    assert any("- retrying (try=" in line for line in seen)
    assert re.search(rf"(Rank [01]|Ranks 0, 1) cannot reach the rendezvous store at 127\.0\.0\.1:{port}", warning)
    assert f"train.py:{line_of(script, 'MASTER_ADDR')}" in warning and f"train.py:{line_of(script, 'MASTER_PORT')}" \
        in warning
    assert f"mp.spawn (train.py:{line_of(script, 'mp.spawn(')})" in warning
    assert "every rank's children join it as clients" in warning and "`python train.py`" in warning
    assert f"cannot reach the rendezvous store at 127.0.0.1:{port}" in shown[0]  # the Monitor's banner
    assert f"train.py:{line_of(script, 'MASTER_PORT')}" in shown[0]
    diagnosed = diagnosed_first(capsys, record)
    assert f"127.0.0.1:{port}" in diagnosed and "mp.spawn" in diagnosed


def test_a_store_that_refuses_silently_is_named_from_the_spawned_childrens_stacks_then_by_diagnose(tmp_path, capsys):
    """Every connection refused: torch mostly says nothing (none in 75 s on an idle box), yet once in CI, on a loaded
    box, it logged a retry before the stacks were in. Its C++ log is held to errors here, so only the stacks tell it."""
    quiet_torch = dict(no_gpu_env(), TORCH_CPP_LOG_LEVEL="ERROR")
    with socket.socket() as holder:  # bound, never listening: every connection is refused
        holder.bind(("127.0.0.1", 0))
        port = holder.getsockname()[1]
        script = script_with_port(tmp_path, port)
        seen, warning, record = follow_until_warned(script, "waits in init_process_group at train.py:",
                                                    env=quiet_torch)
    logged = [line for line in seen if "- retrying (try=" in line or "failed to connect" in line]
    assert not logged, logged  # the logs said nothing
    assert re.search(rf"(Rank [01]|Ranks 0, 1) cannot reach the rendezvous store at 127\.0\.0\.1:{port}", warning)
    assert f"mp.spawn (train.py:{line_of(script, 'mp.spawn(')})" in warning
    assert any("waits in init_process_group at train.py:" in line for line in seen), "\n".join(seen)  # the children
    diagnosed = diagnosed_first(capsys, record)
    assert f"127.0.0.1:{port}" in diagnosed and "mp.spawn" in diagnosed


def test_the_fix_it_gives_run_with_plain_python_trains(tmp_path):
    port = free_port()  # for the script's own rank 0 to host the store on
    script = script_with_port(tmp_path, port)
    trained = subprocess.run([sys.executable, "train.py"], cwd=script.parent, capture_output=True, text=True,
                             timeout=240, env=no_gpu_env())
    assert trained.returncode == 0, trained.stderr[-3000:]
    assert "trained 5 steps" in trained.stdout
