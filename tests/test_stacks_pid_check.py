"""`runs stacks` and the hang watch signal a rank's pid only when that process is the run's (issue 46,
item 4): a forged or stale ranks/rank<R>.json naming another process (here: this test's own process,
with its kill caught; in the integration test a real `sleep`) gets no signal and is listed as missing."""
from __future__ import annotations

import io
import json
import os
import subprocess
from pathlib import Path

import pytest

from mgtutor.diagnostics.failures.hang.watch import take_report
from mgtutor.training.runs.forensics import stacks
from mgtutor.training.runs.records.record import RunRecord, RunStatus
from mgtutor.tui.commands.runs.stacks import stacks_main


def forged_run(pid: int, name: str = "20261206-100000-forged-0001") -> RunRecord:
    run = Path(os.environ["XDG_STATE_HOME"]) / "mgtutor" / "runs" / name
    for sub in ("logs", "ranks", "stacks/live"):
        (run / sub).mkdir(parents=True)
    (run / "meta.json").write_text(json.dumps({"run_id": name, "world_size": 1, "backend": "gloo", "started": 1.0}))
    (run / "ranks" / "rank0.json").write_text(json.dumps({"rank": 0, "pid": pid, "started": 1.0}))
    (run / "stacks" / "live" / f"pid{pid}.txt").write_text("")  # the hook's file, planted too
    return RunRecord(run)


def test_runs_stacks_never_signals_a_pid_that_is_not_the_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    signalled: list[tuple[int, int]] = []
    monkeypatch.setattr(stacks.os, "kill", lambda pid, sig: signalled.append((pid, sig)))
    monkeypatch.setenv(stacks.METHOD_ENV, "signal")  # no py-spy process in the fast tier
    record = forged_run(os.getpid())
    monkeypatch.setattr(RunRecord, "status", lambda self: RunStatus.RUNNING)
    out = io.StringIO()
    assert stacks_main(record.run_id, as_json=True, out=out) == 0
    assert signalled == []
    missing = json.loads(out.getvalue())["missing"]
    assert any(f"process {os.getpid()} is not this run's" in m for m in missing), missing
    report, capture = take_report(record, reason="stall", save=False, flight=False)  # the hang watch's look
    assert signalled == [] and capture.processes == []


@pytest.mark.integration
def test_a_stranger_named_in_a_rank_file_survives_the_capture() -> None:
    stranger = subprocess.Popen(["sleep", "60"])
    try:
        record = forged_run(stranger.pid, "20261206-100000-forged-0002")
        capture = stacks.capture_stacks(record, method="signal", save=False)
        assert capture.processes == [] and stranger.poll() is None  # SIGRTMIN+5 would have ended it
    finally:
        stranger.kill()
        stranger.wait()
