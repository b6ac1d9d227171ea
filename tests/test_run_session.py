"""The one follow loop on a run directory written here, step by step (no process is started)."""
from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from mgtutor.training.runs.follow import session as session_module
from mgtutor.training.runs.events.types import Event
from mgtutor.training.runs.events.writer import encode
from mgtutor.training.runs.records.record import RankExit, RunMeta, RunRecord, RunStatus, build_result
from mgtutor.training.runs.follow.runstate import RunState
from mgtutor.training.runs.follow.session import RunSession
from mgtutor.training.runs.follow.detectors import Alert

T0 = 1767225600.0


class CountingDetector:
    """Raises the same alert on every poll; sees every event once."""

    def __init__(self) -> None:
        self.seen: list[Event] = []
        self.polls = 0

    def observe(self, events: Sequence[Event]) -> None:
        self.seen += events

    def poll(self, state: RunState, now: float) -> list[Alert]:
        self.polls += 1
        return [Alert("slow", (1,), f"rank 1 is slow in {state.phase}")]


@pytest.fixture
def record(tmp_path: Path) -> RunRecord:
    record = RunRecord.create("session", tmp_path)
    record.write_meta(RunMeta(run_id=record.run_id, world_size=2, backend="gloo", started=T0,
                              target=["-m", "mgtutor.training.worker.train"]))
    return record


def _append(path: Path, data: bytes) -> None:
    with path.open("ab") as handle:
        handle.write(data)


def test_updates_carry_lines_events_state_alerts_then_the_drained_end(record: RunRecord, monkeypatch) -> None:
    monkeypatch.setattr(session_module, "STATE_S", 0.0)  # every poll refreshes the state
    alive = {"running": True}
    detector = CountingDetector()
    diagnosed: list[RunRecord] = []
    session = RunSession(record, detectors=[detector], alive=lambda: alive["running"], clock=lambda: T0 + 5,
                         diagnose=lambda r: diagnosed.append(r) or ["finding"])

    first = session.poll()
    assert first.state is not None and first.state.phase == "starting" and first.lines == []
    assert [a.kind for a in first.new_alerts] == ["slow"] and first.alerts is not None

    record.write_rank(RankExit(rank=0, pid=10, started=T0 + 1))
    _append(record.rank_log(0, "stdout"), b"hello\nstep 1\rstep 2\r")
    _append(record.events_path, encode("start", 0, pid=10) + encode("step", 0, step=1, loss=1.5)
            + b'{"rank": 0, "t": 1, "type": "step", "step": "bad"}\n' + encode("step", 1, step=1)[:9])
    second = session.poll()
    assert [(r, s, t) for r, s, t in second.lines if r == 0] == [(0, "stdout", "hello"), (0, "stdout", "step 1"),
                                                                  (0, "stdout", "step 2")]
    assert [e.type for e in second.events] == ["start", "step"] and session.skipped_events == 1
    assert second.state is not None and second.state.phase == "training" and second.state.ranks[0].last_step == 1
    assert second.new_alerts == []  # the same alert is news once
    assert detector.seen == second.events

    # the run ends: a partial last log line and the rest of a torn event are still read
    _append(record.rank_log(1, "stderr"), b"Traceback\nRuntimeError: boom")
    _append(record.events_path, encode("step", 1, step=1)[9:])
    record.write_rank(RankExit(rank=0, pid=10, started=T0 + 1, ended=T0 + 6, exit_code=0))
    record.write_rank(RankExit(rank=1, pid=11, started=T0 + 1, ended=T0 + 5, exit_code=1))
    record.write_result(build_result(record, torchrun_exit=1))
    alive["running"] = False
    rest = list(session.updates())
    assert len(rest) == 1 and rest[0].final
    final = rest[0]
    assert (1, "stderr", "RuntimeError: boom") in final.lines
    assert [e.rank for e in final.events] == [1]
    assert final.result is not None and final.result.status is RunStatus.FAILED
    assert final.state is not None and final.state.phase == "failed" and final.state.ranks[1].last_step == 1
    assert final.findings == ["finding"] and diagnosed == [record] and not final.stopped
    assert session.poll().final is False and session.stop() is final  # the end is reported once


def test_a_detector_that_breaks_is_turned_off_and_said_once(record: RunRecord) -> None:
    class Broken(CountingDetector):
        def poll(self, state: RunState, now: float) -> list[Alert]:
            raise KeyError("boom")

    session = RunSession(record, detectors=[Broken()], alive=lambda: True)
    update = session.poll()
    assert update.detector_error == "KeyError: 'boom'" and update.alerts is None
    assert session.detectors == []


def test_a_run_stopped_by_its_timeout_is_drained_and_diagnosed(record: RunRecord) -> None:
    _append(record.rank_log(0, "stdout"), b"waiting for the others")
    session = RunSession(record, timeout_s=0.0, diagnose=lambda r: ["hang"], alive=lambda: True)
    updates = list(session.updates())
    assert len(updates) == 1 and updates[0].final and updates[0].timed_out
    assert updates[0].lines == [(0, "stdout", "waiting for the others")]
    assert updates[0].result is not None and updates[0].result.status is RunStatus.LOST  # no Run to stop here
    assert updates[0].findings == ["hang"]


def test_a_finished_record_replays_to_its_end(record: RunRecord) -> None:
    _append(record.events_path, b"".join(encode("step", r, step=s, loss=1.0, samples_per_s=5.0)
                                         for s in (1, 2) for r in (0, 1)))
    for rank in (0, 1):
        record.write_rank(RankExit(rank=rank, pid=20 + rank, started=T0, ended=T0 + 3, exit_code=0))
    record.write_result(build_result(record, torchrun_exit=0))
    (final,) = list(RunSession(record).updates())
    assert final.result is not None and final.result.status is RunStatus.FINISHED
    assert final.state is not None and len(final.state.total_throughput) == 2 and final.state.done
    assert json.loads((record.path / "result.json").read_text())["status"] == "finished"


def test_a_quiet_run_is_polled_less_often_until_it_talks_again(record: RunRecord, monkeypatch) -> None:
    now = {"t": 100.0}
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        now["t"] += seconds
        if len(sleeps) == 30:  # the run talks after a quiet spell
            _append(record.rank_log(0, "stdout"), b"step 9\n")

    monkeypatch.setattr(session_module.time, "monotonic", lambda: now["t"])
    monkeypatch.setattr(session_module.time, "sleep", sleep)
    session = RunSession(record, alive=lambda: len(sleeps) < 34, watcher=None)
    talked = [u for u in session.updates() if u.lines]
    assert [line for u in talked for line in u.lines] == [(0, "stdout", "step 9")]
    quiet = sleeps[:30]
    assert quiet[0] == session_module.POLL_S and quiet[-1] == session_module.IDLE_POLL_S
    fast = [s for s in quiet if s == session_module.POLL_S]
    quick_for = len(fast) * session_module.POLL_S  # about IDLE_AFTER_S of quick polls, then the slow ones
    assert session_module.IDLE_AFTER_S <= quick_for <= session_module.IDLE_AFTER_S + 2 * session_module.POLL_S
    assert sleeps[30] == session_module.POLL_S  # new lines: back to the quick poll at once
