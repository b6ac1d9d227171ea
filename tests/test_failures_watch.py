"""Live detectors on real runs: a rank missing at the rendezvous is named within seconds; a straggler;
a silent run. The hang is real (the trainer's hang-before-init), the thresholds are short."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from mgtutor.training.runs.records.types import RunMeta
from mgtutor.diagnostics.failures.demos import SCENARIOS
from mgtutor.training.runs.launch.launcher import LaunchSpec, launch
from mgtutor.training.runs.records.record import RunRecord
from mgtutor.training.runs.follow.session import RunSession
from mgtutor.training.runs.follow.detectors import RunWatch


@pytest.mark.integration
@pytest.mark.slow
def test_missing_rank_is_named_while_the_other_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")
    target = [a if a != "8" else "60" for a in SCENARIOS["never-joins"].target]  # rank 0 waits long enough
    run = launch(LaunchSpec(target=target, nproc=2, backend="gloo", label="watch-hang"))
    try:
        session = RunSession(run.record, run, detectors=[RunWatch(run.record, rendezvous_after=3.0)], timeout_s=90)
        alerts: list = []
        for update in session.updates():
            alerts = [a for a in update.new_alerts if a.kind == "rendezvous_late"]
            if alerts and alerts[0].ranks == (1,):
                break
        assert alerts and alerts[0].ranks == (1,), alerts
        assert "rank 0 waits" in alerts[0].message
    finally:
        run.stop(grace=3)


def _record(tmp_path: Path, events: list[dict], world: int = 2, started: float | None = None) -> RunRecord:
    record = RunRecord.create("watch", tmp_path)
    record.write_meta(RunMeta.from_json({"world_size": world, "started": started or time.time(), "supervisor_pid": None}))
    with record.events_path.open("w") as handle:
        for event in events:
            handle.write(json.dumps(event) + "\n")
    return record


def test_straggler_and_lag_from_step_events(tmp_path: Path) -> None:
    events = [{"rank": r, "t": time.time(), "type": "step", "step": s, "loss": 1.0 + r,
               "data_wait_s": 0.3 if r == 1 else 0.001} for s in range(1, 6) for r in (0, 1)]
    events += [{"rank": 2, "t": time.time(), "type": "step", "step": 20, "loss": 1.0, "data_wait_s": 0.001}]
    record = _record(tmp_path, events, world=3)
    alerts = RunSession(record, detectors=[RunWatch(record)], alive=lambda: True).poll().alerts or []
    kinds = {(a.kind, a.ranks) for a in alerts}
    assert ("straggler", (1,)) in kinds  # its own step time dwarfs the others'
    assert ("straggler", (0,)) in kinds  # 15 steps behind the fastest
    assert not any(a.kind == "rendezvous_late" for a in alerts)  # events show every rank joined


def test_a_stragglers_evidence_is_said_in_chinese_from_its_message_id(tmp_path: Path) -> None:
    from mgtutor.training.foundation.i18n import in_language

    events = [{"rank": r, "t": time.time(), "type": "step", "step": s, "loss": 1.0 + r,
               "data_wait_s": 0.3 if r == 1 else 0.001} for s in range(1, 6) for r in (0, 1)]
    record = _record(tmp_path, events, world=2)
    with in_language("zh"):
        alerts = RunSession(record, detectors=[RunWatch(record)], alive=lambda: True).poll().alerts or []
    said = next(a.message for a in alerts if a.kind == "straggler")
    assert said.startswith("rank 1 ") and "0.300" in said and "0.001" in said
    assert "spends" not in said and "the other ranks" not in said, said


def test_silent_run_is_flagged_with_last_lines(tmp_path: Path) -> None:
    record = _record(tmp_path, [], started=time.time() - 500)
    record.rank_log(0, "stdout").write_text("step 1\nstep 2\nentering all_reduce\n")
    record.rank_log(1, "stderr").write_text("loading shard 7\n")
    watch = RunWatch(record, rendezvous_after=1e9, silent_after=60)
    later = time.time() + 120
    alerts = RunSession(record, detectors=[watch], alive=lambda: True, clock=lambda: later).poll().alerts or []
    hung = [a for a in alerts if a.kind == "possibly_hung"]
    assert hung and hung[0].last_lines[0][-1] == "entering all_reduce" and hung[0].last_lines[1] == ["loading shard 7"]
    final = RunSession(record, detectors=[watch], alive=lambda: False, clock=lambda: later).poll()
    assert final.final and final.alerts == [] and final.new_alerts == []  # a finished run raises nothing


def test_no_late_rank_while_nobody_waits(tmp_path: Path) -> None:
    """A one-rank script without init_process_group (or ranks that all do slow set-up first) is not late."""
    from mgtutor.training.runs.records.record import RankExit

    record = _record(tmp_path, [], world=1, started=time.time() - 100)
    record.write_rank(RankExit(rank=0, pid=os.getpid(), started=time.time() - 99))
    alerts = RunSession(record, detectors=[RunWatch(record, rendezvous_after=30)], alive=lambda: True).poll().alerts
    assert not any(a.kind == "rendezvous_late" for a in alerts or [])
