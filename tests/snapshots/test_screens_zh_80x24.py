"""Home, Lessons, Help, Troubleshoot, the Monitor (its launch form, a live run, a failed run),
Diagnostics and Runs in Simplified Chinese at 80×24: each CJK character takes two cells, and nothing
is cut — the footer keys, the way-forward grid, the lesson list and text, the help window, the symptom
list, the form's labels, the run's state and failure banner, the doctor's checklist, the runs table."""
from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from mgtutor.training.foundation.i18n import set_language
from mgtutor.training.runs.records.record import RunRecord, build_result
from mgtutor.tui.app import MgTutorApp
from mgtutor.tui.screens.diagnostics import DiagnosticsScreen
from tests.snapshots.monitor_fixture_app import FIXTURE, FixtureApp, show_fixture_run


async def wait_settled(pilot) -> None:
    await pilot.pause(0.5)
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


@pytest.mark.sweep
@pytest.mark.parametrize("keys", [["h"], ["l"], ["h", "question_mark"], ["t"], ["m"]],
                         ids=["home", "lessons", "help", "troubleshoot", "monitor-launch-form"])
def test_screen_in_chinese_at_80x24(snap_compare, keys, monkeypatch):
    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")
    set_language("zh")
    assert snap_compare(MgTutorApp(), press=keys, run_before=wait_settled, terminal_size=(80, 24))


# Diagnostics, Runs and the Monitor with a run: what they show is fixed (a saved doctor report, runs
# whose ids and start times are set, the fixture run), so each snapshot says only how the screen draws.
T0 = 1767225600.0  # 2026-01-01 00:00 UTC
DATA = Path(__file__).parent.parent / "data"
RUNS_HOME = Path("/tmp/mgtutor-zh-snapshot")  # the Runs screen shows where its records are: one fixed place


@pytest.fixture
def utc(monkeypatch):
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


class FixtureDiagnostics(DiagnosticsScreen):
    """The doctor's report of a machine without a GPU: its facts as saved, its checks made from them as
    the doctor makes them (no torch child asked)."""

    def run_doctor(self) -> None:
        from mgtutor.diagnostics.doctor.checks import run_checks
        from mgtutor.diagnostics.doctor.topology import Topology

        report = json.loads((DATA / "doctor_report_cpu.json").read_text())
        report["checks"] = run_checks(report, Topology())
        self.show_doctor(report)


class FixtureDiagnosticsApp(FixtureApp):
    MODES = {**FixtureApp.MODES, "diagnostics": FixtureDiagnostics}


def test_diagnostics_in_chinese_at_80x24(snap_compare, monkeypatch, utc):
    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")
    set_language("zh")
    assert snap_compare(FixtureDiagnosticsApp(), press=["d"], run_before=wait_settled, terminal_size=(80, 24))


@pytest.mark.integration
def test_monitor_live_run_in_chinese_at_80x24(snap_compare, monkeypatch):
    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")
    set_language("zh")
    assert snap_compare(FixtureApp(), run_before=show_fixture_run, terminal_size=(80, 24))


def failed_fixture_run(root: Path) -> RunRecord:
    """The fixture run, ended: rank 1 failed at step 60 with DDP's unused-parameter error, rank 0 was
    stopped by torchrun. Written as the run layer writes a record, at fixed times."""
    record = RunRecord(root / "20260101-000000-train-tinycnn-f1x7")
    shutil.copytree(FIXTURE, record.path)
    error = (DATA / "logs" / "ddp_unused.log").read_text().splitlines()[3]
    with record.rank_log(1, "stderr").open("a") as log:
        log.write(error.split(": ", 1)[1] + "\n")
    with record.events_path.open("a") as events:
        events.write(json.dumps({"rank": 1, "t": T0 + 34.5, "type": "error", "error": "RuntimeError: Expected to "
                                 "have finished reduction in the prior iteration"}) + "\n")
    for rank, code in ((0, -15), (1, 1)):
        path = record.path / "ranks" / f"rank{rank}.json"
        info = json.loads(path.read_text())
        info.update(ended=T0 + (34.6 if rank else 35.0), exit_code=code,
                    signal="SIGTERM" if code < 0 else None)
        path.write_text(json.dumps(info))
    record.write_result(build_result(record, torchrun_exit=1))
    record.update_meta(ended=T0 + 36.0, status="failed")
    return record


async def show_failed_run(pilot) -> None:
    from tests.helpers import wait_for_app

    await pilot.press("m")
    screen = pilot.app.screen
    screen.attach(failed_fixture_run(Path(os.environ["XDG_STATE_HOME"])), alive=lambda: False)
    await wait_for_app(pilot, lambda: screen.state is not None and screen.state.done and screen.finding, 30,
                       what="the failed run and its diagnosis")
    await wait_settled(pilot)
    screen.query_one("#rank-log").scroll_end(animate=False, immediate=True)
    await pilot.pause()


@pytest.mark.integration
def test_monitor_failed_run_in_chinese_at_80x24(snap_compare, monkeypatch):
    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")
    set_language("zh")
    assert snap_compare(FixtureApp(), run_before=show_failed_run, terminal_size=(80, 24))


def fixed_id_runs(monkeypatch, write_script) -> None:
    """A finished and a failed run of 2 gloo ranks, with set ids and start times (the torch-free event script's
    ranks, started by the stand-in torchrun: the Runs screen shows mgtutor's records, nothing of torchrun's)."""
    from mgtutor.training.runs.records import record as records
    from mgtutor.training.runs.launch.launcher import LaunchSpec, launch
    from tests.monitor_helpers import EVENT_SCRIPT

    ids = iter(["20260101-000000-finished-a1b2", "20260101-000100-crash-c3d4"])
    monkeypatch.setattr(records, "new_run_id", lambda label: next(ids))
    script = str(write_script("events.py", EVENT_SCRIPT))
    for minute, args in enumerate(([script, "4"], [script, "8", "1"])):
        run = launch(LaunchSpec(target=args, nproc=2, backend="gloo"))
        run.wait(120)
        run.record.update_meta(started=T0 + 60 * minute)


@pytest.mark.integration
def test_runs_in_chinese_at_80x24(snap_compare, monkeypatch, write_script, utc, standin_torchrun):
    shutil.rmtree(RUNS_HOME, ignore_errors=True)
    monkeypatch.setenv("XDG_STATE_HOME", str(RUNS_HOME))
    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")
    fixed_id_runs(monkeypatch, write_script)
    set_language("zh")
    try:
        assert snap_compare(MgTutorApp(), press=["r"], run_before=wait_settled, terminal_size=(80, 24))
    finally:
        shutil.rmtree(RUNS_HOME, ignore_errors=True)
