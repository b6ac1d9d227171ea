"""The monitor's headless parts: the run-state fold, the failure sentence, log buffers and the
form's checks, on a pre-written run directory and on hand-written records."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from mgtutor.training.runs.records.types import RunMeta, RunResult
from mgtutor.training.runs.records.record import RunRecord
from mgtutor.training.runs.follow.runstate import RunStateFolder, describe_failure
from mgtutor.tui.widgets.launch_form import FormError, FormValues, build_launch
from mgtutor.tui.widgets.rank_logs import LogBuffer, neutralise
from mgtutor.tui.widgets.training_charts import sparkline

FIXTURE = Path(__file__).parent / "data" / "monitor_runs" / "20260101-000000-train-tinycnn-f1x7"
T0 = 1767225600.0


@pytest.fixture
def fixture_run(tmp_path: Path) -> RunRecord:
    path = tmp_path / FIXTURE.name
    shutil.copytree(FIXTURE, path)
    return RunRecord(path)


def test_fixture_run_folds_to_training_with_series_and_straggler(fixture_run):
    state = RunStateFolder(fixture_run, alive=lambda: True).refresh(now=T0 + 40)
    assert state.phase == "training"
    assert state.world_size == 2 and state.backend == "nccl"
    assert state.pids() == {4242: 0, 4243: 1}
    assert [len(r.throughput) for r in state.ranks.values()] == [60, 60]
    assert len(state.total_throughput) == 60
    assert state.ranks[0].last_step == 60
    assert state.stragglers() == [1]  # rank 1 runs at ~70% of rank 0
    assert state.elapsed(T0 + 40) == 40


def test_a_snapshot_keeps_what_it_saw_while_the_folder_goes_on(fixture_run):
    folder = RunStateFolder(fixture_run, alive=lambda: True)
    snap = folder.refresh(now=T0 + 40).snapshot()
    seen = (snap.phase, list(snap.ranks[0].throughput), list(snap.total_throughput), snap.phases_seen[:])
    live = folder.state
    live.ranks[0].throughput.append((61, 1.0))
    live.total_throughput.append((61, 2.0))
    live.ranks[0].last_step, live.phase = 61, "failed"
    live.phases_seen.append("failed")
    live.ranks[5] = live.ranks[0]
    assert (snap.phase, list(snap.ranks[0].throughput), list(snap.total_throughput), snap.phases_seen) == seen
    assert snap.ranks[0].last_step == 60 and 5 not in snap.ranks
    assert snap.ranks[0].throughput.maxlen == live.ranks[0].throughput.maxlen


def test_phases_follow_the_events_as_they_arrive(tmp_path):
    record = RunRecord.create("phases", tmp_path)
    record.write_meta(RunMeta.from_json({"world_size": 2, "backend": "gloo", "started": T0}))
    folder = RunStateFolder(record, alive=lambda: True)
    assert folder.refresh(T0).phase == "starting"
    events = record.events_path.open("a")
    events.write(json.dumps({"rank": 0, "t": T0 + 1, "type": "start", "pid": 11}) + "\n")
    events.flush()
    state = folder.refresh(T0 + 5)
    assert state.phase == "rendezvous"
    assert state.ranks[0].waited(T0 + 5) == 4 and state.ranks[1].started is None
    events.write(json.dumps({"rank": 0, "t": T0 + 6, "type": "rendezvous"}) + "\n")
    events.write('{"rank": 1, "t": 1, "type": "st')  # a torn line waits for its end
    events.flush()
    assert folder.refresh(T0 + 6).phase == "rendezvous"
    events.write('art"}\n' + json.dumps({"rank": 1, "t": T0 + 7, "type": "rendezvous"}) + "\n")
    events.flush()
    assert folder.refresh(T0 + 7).phase == "training"
    events.write(json.dumps({"rank": 1, "t": T0 + 8, "type": "step", "step": 1, "loss": "nan",
                             "samples_per_s": 10}) + "\n")
    events.close()
    state = folder.refresh(T0 + 8)
    assert state.ranks[1].last_step == 1 and state.ranks[1].loss[0][0] == 1
    record.write_result(RunResult.from_json({"status": "finished", "ranks": [], "first_failure": None, "duration_s": 9.0}))
    state = folder.refresh(T0 + 9)
    assert state.phases_seen == ["starting", "rendezvous", "training", "finished"]
    assert state.done and describe_failure(state) is None


def test_a_rendezvous_shorter_than_one_look_is_still_on_the_path(tmp_path):
    record = RunRecord.create("quick", tmp_path)
    record.write_meta(RunMeta.from_json({"world_size": 2, "backend": "gloo", "started": T0}))
    folder = RunStateFolder(record, alive=lambda: True)
    folder.refresh(T0)
    record.events_path.write_text("".join(json.dumps(e) + "\n" for e in [
        {"rank": 0, "t": T0 + 1, "type": "start", "pid": 11}, {"rank": 1, "t": T0 + 1, "type": "start", "pid": 12},
        {"rank": 0, "t": T0 + 1.2, "type": "rendezvous"}, {"rank": 1, "t": T0 + 1.2, "type": "rendezvous"}]))
    assert folder.refresh(T0 + 2).phases_seen == ["starting", "rendezvous", "training"]


def test_failure_sentence_names_the_first_rank_and_signal(tmp_path):
    record = RunRecord.create("fail", tmp_path)
    record.write_meta(RunMeta.from_json({"world_size": 2, "backend": "gloo", "started": T0}))
    record.write_result(RunResult.from_json({"status": "failed", "first_failure": {"rank": 1, "exit_code": None, "signal": "SIGKILL"},
                         "ranks": [{"rank": 0, "outcome": "stopped after the first failure"},
                                   {"rank": 1, "outcome": "failed"}]}))
    state = RunStateFolder(record).refresh()
    text = describe_failure(state)
    assert text.startswith("rank 1 was killed by SIGKILL — likely the host OOM killer")
    assert "stopped rank 0" in text


def test_a_run_without_result_or_process_is_lost(tmp_path):
    record = RunRecord.create("lost", tmp_path)
    record.write_meta(RunMeta.from_json({"world_size": 1, "started": T0, "supervisor_pid": 0}))
    state = RunStateFolder(record).refresh()
    assert state.phase == "lost" and "without a result" in describe_failure(state)


def test_neutralise_drops_escape_sequences_and_controls():
    assert neutralise("\x1b[31mred\x1b[0m \x1b]0;title\x07ok\x07\tx") == "red ok? x"
    assert neutralise("\x1b[2J\x1b[Hclear") == "clear"


def test_log_buffer_is_bounded_and_remembers_the_first_error():
    buffer = LogBuffer(max_lines=5)
    buffer.extend([f"line {i}" for i in range(3)] + ["RuntimeError: boom"] + [f"after {i}" for i in range(10)])
    assert len(buffer.lines) == 5 and buffer.total == 14 and buffer.dropped == 9
    assert buffer.first_error == 3 and buffer.first_error_text == "RuntimeError: boom"
    assert buffer.find("after 9") == 4 and buffer.find("after 5", after=4) == 0 and buffer.find("zzz") is None


def test_sparkline_scales_between_bounds():
    assert sparkline([0, 50, 100], 10, low=0, high=100) == "▁▅█"
    assert sparkline(list(range(100)), 4) == "▁▃▆█"  # the last 4 values, scaled to their own range
    assert sparkline([], 5) == "" and sparkline([1.0, 1.0], 5) == "██"


def test_form_builds_the_trainer_command_and_catches_bad_values():
    spec, command = build_launch(FormValues(nproc="2", backend="gloo", inject="crash-rank", inject_rank="1"))
    assert spec.nproc == 2 and spec.backend == "gloo"
    assert spec.target[:2] == ["-m", "mgtutor.training.worker.train"]
    assert "--inject crash-rank --inject-rank 1" in command
    assert command.startswith("mgtutor run --nproc 2 --backend gloo -- -m mgtutor.training.worker.train --model tinycnn")
    with pytest.raises(FormError, match="batch size must be a whole number"):
        build_launch(FormValues(batch_size="lots"))
    with pytest.raises(FormError, match="ranks must be a whole number of at least 1"):
        build_launch(FormValues(nproc="0"))
    with pytest.raises(FormError, match="inject rank 3 does not exist with 2 ranks"):
        build_launch(FormValues(inject="crash-rank", inject_rank="3"))
    with pytest.raises(FormError, match="path of your training script"):
        build_launch(FormValues(kind="script"))
    spec, command = build_launch(FormValues(kind="script", script="my train.py", script_args="--lr 0.1", nproc=""))
    assert spec.nproc is None and spec.target == ["my train.py", "--lr", "0.1"]
    assert command == "mgtutor run -- 'my train.py' --lr 0.1"


@pytest.mark.integration
async def test_search_and_follow_keys_on_a_replayed_run(tmp_path):
    """/ finds a line in the visible tab and stops following; p toggles following back on."""
    from textual.widgets import Input

    from tests.helpers import wait_for_app
    from tests.monitor_helpers import make_app
    from mgtutor.tui.widgets.rank_logs import RankLogs

    path = tmp_path / FIXTURE.name
    shutil.copytree(FIXTURE, path)
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("m")
        screen = app.screen
        screen.attach(RunRecord(path), alive=lambda: True)
        logs = screen.query_one(RankLogs)
        await wait_for_app(pilot, lambda: logs.buffers[MERGED_TAB].total == 18, 30, what="the fixture's lines")
        await pilot.press("slash")
        assert app.focused is logs.query_one("#log-search", Input)
        await pilot.press(*"step   30", "enter")
        assert logs.search_text == "step   30" and logs.log_view.auto_scroll is False
        assert "step   30" in logs.log_view.lines[logs._match]
        await pilot.press("n")
        assert "[rank 1] step   30" in logs.log_view.lines[logs._match]
        await pilot.press("p")
        assert logs.log_view.auto_scroll is True
        await pilot.press("slash", "x", "escape")
        assert not logs.has_class("-searching")
        screen.workers.cancel_group(screen, "monitor-watch")


MERGED_TAB = "all"
