"""Typed records keep the documented JSON: today's records round-trip, older ones still open,
an unreadable meta.json says so."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from mgtutor.training.runs.records.record import (
    FirstFailure,
    RankExit,
    RunMeta,
    RunRecord,
    RunResult,
    RunStatus,
    StopReport,
    build_result,
    exit_code_for,
)
from mgtutor.training.runs.follow.runstate import RunStateFolder

FIXTURE = Path(__file__).parent / "data" / "monitor_runs" / "20260101-000000-train-tinycnn-f1x7"


def test_a_record_written_today_opens_with_the_same_json(tmp_path: Path) -> None:
    record = RunRecord.create("today", tmp_path)
    meta = RunMeta(run_id=record.run_id, label="today", target=["-m", "mgtutor.training.worker.train"],
                   world_size=2, nproc_per_node=2, backend="gloo", started=100.0, supervisor_pid=0,
                   global_ranks=[0, 1], extra={"something_new": 1})
    record.write_meta(meta)
    record.write_rank(RankExit(rank=0, pid=11, started=100.5, ended=103.0, exit_code=0))
    record.write_rank(RankExit(rank=1, pid=12, started=100.5, ended=102.0, signal="SIGKILL"))
    record.update_meta(ended=103.0, status=RunStatus.FAILED)
    record.write_result(build_result(record, torchrun_exit=1))

    on_disk = json.loads((record.path / "meta.json").read_text())
    assert on_disk["status"] == "failed" and on_disk["something_new"] == 1 and on_disk["world_size"] == 2
    opened = record.meta()
    assert opened.status is RunStatus.FAILED and opened.extra == {"something_new": 1} and opened.problem is None
    assert opened.to_json() == on_disk and opened.speaks_events()
    result = record.result()
    assert result.status == "failed" and result.first_failure == FirstFailure(1, None, "SIGKILL")
    assert [r.outcome for r in result.ranks] == ["ok", "failed"]
    assert json.loads((record.path / "result.json").read_text()) == result.to_json()
    assert result.to_json()["first_failure"] == {"rank": 1, "exit_code": None, "signal": "SIGKILL"}
    assert exit_code_for(result) == 128 + 9
    assert record.status() == "failed" and f"{record.status()}" == "failed"


def test_a_result_written_while_a_stop_holds_the_lock_is_not_the_last_word(tmp_path: Path) -> None:
    record = RunRecord.create("stopping", tmp_path)
    record.write_meta(RunMeta(run_id=record.run_id, world_size=1, started=100.0))
    with record.stopping():
        record.write_result(build_result(record, stopped=True))  # the supervisor's, as it exits
        assert record.stop_under_way() and record.settled_result() is None
        assert record.status() == RunStatus.RUNNING
        assert not RunStateFolder(record).refresh().done
        result = record.saved_result()
        result.stop = StopReport(requested=101.0, processes=2, clean=True)
        record.write_result(result)  # the stop's report joins it
    assert not record.stop_under_way() and record.status() == RunStatus.STOPPED
    state = RunStateFolder(record).refresh()
    assert state.done and state.result.stop == StopReport(requested=101.0, processes=2, clean=True)


def test_an_older_record_opens_with_defaults(tmp_path: Path) -> None:
    path = tmp_path / FIXTURE.name
    shutil.copytree(FIXTURE, path)
    record = RunRecord(path)
    meta = record.meta()
    assert (meta.world_size, meta.backend, meta.label, meta.started) == (2, "nccl", "train-tinycnn", 1767225600.0)
    assert meta.supervisor_pid is None and meta.rdzv_endpoint is None and meta.problem is None
    ranks = record.ranks()
    assert [(r.rank, r.pid, r.ended) for r in ranks] == [(0, 4242, None), (1, 4243, None)]
    # an old result.json without torchrun_exit_code, nnodes or outcomes
    (path / "result.json").write_text(json.dumps({"status": "finished", "ranks": [{"rank": 0, "exit_code": 0}],
                                                  "first_failure": None, "duration_s": 4.0}))
    result = record.result()
    assert result.status is RunStatus.FINISHED and result.nnodes == 1 and result.ranks[0].outcome == ""
    assert result.torchrun_exit_code is None and exit_code_for(result) == 0
    assert record.status() == RunStatus.FINISHED


def test_an_unreadable_meta_is_reported_not_read_as_empty(tmp_path: Path) -> None:
    record = RunRecord.create("broken", tmp_path)
    assert record.meta().problem == "meta.json is missing"
    (record.path / "meta.json").write_text('{"run_id": "x", "world_si')
    meta = record.meta()
    assert meta.problem is not None and "truncated" in meta.problem and meta.world_size == 0
    assert record.status() == RunStatus.LOST  # no result, no supervisor to ask
    (record.path / "meta.json").write_text('{"world_size": "two", "status": "exploded"}')
    meta = record.meta()
    assert meta.world_size == 0 and meta.status is RunStatus.RUNNING
    assert meta.problem == "meta.json has a wrong type: world_size is 'two'"  # said, not silently zero


def test_a_records_problem_is_english_as_kept_and_said_in_chinese_from_its_message_ids(tmp_path: Path) -> None:
    """No English sentence is parsed back: the problem keeps its message ids, and the reader's language says them,
    the list's separator included."""
    from mgtutor.training.foundation.i18n import in_language
    from mgtutor.training.runs.records.record import said_problem

    record = RunRecord.create("broken", tmp_path)
    (record.path / "meta.json").write_text('{"world_size": "two", "started": "yesterday"}')
    with in_language("zh"):
        problem = record.meta().problem
        assert problem == "meta.json has a wrong type: world_size is 'two', started is 'yesterday'"
        assert said_problem(problem) == "meta.json 有问题：类型不对：world_size 是 'two'，started 是 'yesterday'"
    (record.path / "meta.json").unlink()
    with in_language("zh"):
        assert said_problem(record.meta().problem) == "缺少 meta.json"


def test_a_result_round_trips_with_its_stop_report() -> None:
    data = {"run_id": "r", "status": "stopped", "backend": "gloo", "world_size": 1, "nnodes": 1, "node_rank": 0,
            "ranks": [{"rank": 0, "exit_code": None, "signal": "SIGTERM", "pid": 5, "ended": 2.0,
                       "outcome": "stopped"}],
            "first_failure": None, "torchrun_exit_code": None, "duration_s": 1.0,
            "stop": {"requested": 1.0, "processes": 3, "killed": [], "survivors": [], "clean": True}}
    result = RunResult.from_json(data)
    assert result.stop is not None and result.stop.clean and result.ranks[0].signal == "SIGTERM"
    assert result.to_json() == data and exit_code_for(result) == 130


def test_runs_show_says_an_unreadable_meta_is_unknown_not_none(capsys) -> None:
    from mgtutor.training.runs.records.record import runs_root
    from mgtutor.tui.cli import main

    record = RunRecord.create("broken", runs_root())
    record.write_rank(RankExit(rank=0, pid=11, started=100.5, ended=103.0, exit_code=0))
    record.write_rank(RankExit(rank=1, pid=12, started=100.5, ended=103.0, exit_code=0))
    (record.path / "meta.json").write_text('{"run_id": "x", "world_si')
    assert main(["runs", "show", record.run_id]) == 0
    out = capsys.readouterr().out
    assert "None" not in out and "command  unknown (meta.json is unreadable)" in out
    assert "ranks    2 on " in out
