"""The readers of step events with the ranks' hook's cadence (issue 43, item 2), on events and records made
here (no process; the real run's record is tests/test_hook_run_consumers.py's). The hook logs when each
rank's own clock says so, so ranks in lockstep may log a stride apart: no straggler there; a rank whose
steps stop while another's go on is named; the stall clock does not take every rank's stack each second
for as long as such a rank stays stopped; `runs show` says each rank's last step, or why there is none;
the Monitor says where each rank's steps are; the report's step time is the hook's own."""
from __future__ import annotations

import json
from pathlib import Path

from mgtutor.diagnostics.report.charts import step_charts
from mgtutor.training.runs.events.types import StepEvent
from mgtutor.training.runs.follow.detectors import RunWatch
from mgtutor.training.runs.follow.runstate import RankState, RunState
from mgtutor.training.runs.follow.stall import StallClock
from mgtutor.training.runs.follow.summary import last_steps
from mgtutor.training.runs.records.record import RunMeta, RunRecord
from mgtutor.tui.cli import main as cli_main
from mgtutor.tui.widgets.run_state import state_text

T0 = 1_800_000_000.0


def hook_step(rank: int, t: float, step: int, **fields: object) -> StepEvent:
    return StepEvent(rank=rank, t=T0 + t, step=step, origin="hook", data_wait_s=0.001, step_s=0.05, **fields)


def training(world: int = 2) -> RunState:
    return RunState(run_id="r", phase="training", world_size=world, started=T0,
                    ranks={r: RankState(r, pid=100 + r, started=T0, joined=T0) for r in range(world)})


def straggler_alerts(tmp_path: Path, events: list[StepEvent], now: float) -> list[str]:
    watch = RunWatch(RunRecord(tmp_path), rendezvous_after=0, silent_after=0)  # 0: those warnings off
    watch.observe(events)
    return [a.message for a in watch.poll(training(), T0 + now) if a.kind == "straggler"]


def test_hook_ranks_in_lockstep_that_log_a_stride_apart_are_no_stragglers(tmp_path):
    """Rank 1's clock missed the 1 s mark at step 20 by a hair: it logs 30 and 50 where rank 0 logs 20, 40, 60."""
    events = [hook_step(0, 0, 1), hook_step(1, 0, 1), hook_step(0, 1.0, 20), hook_step(1, 1.5, 30),
              hook_step(0, 2.0, 40), hook_step(1, 2.5, 50), hook_step(0, 3.0, 60)]
    assert straggler_alerts(tmp_path, events, 3.2) == []


def test_a_hook_rank_whose_steps_stop_while_another_goes_on_is_named(tmp_path):
    events = [hook_step(1, 0, 1)] + [hook_step(0, t, max(1, 20 * t)) for t in range(5)]
    assert straggler_alerts(tmp_path, events[:4], 2.5) == []  # 2.5 s: still within a stride or two
    said = straggler_alerts(tmp_path, events, 4.2)
    assert said == ["rank 1 has logged no step for 4 s (its last logged step is 1) while rank 0 went on to step 80: "
                    "it stopped stepping, or steps far slower"]


def test_when_every_hook_rank_stopped_the_straggler_alert_leaves_it_to_the_hang_watch(tmp_path):
    events = [hook_step(1, 0, 1), hook_step(0, 0, 1), hook_step(0, 1.0, 20)]
    assert straggler_alerts(tmp_path, events, 30.0) == []  # rank 0 stopped too: a hang, not a straggler


def test_a_rank_stopped_while_the_others_go_on_is_not_looked_at_every_second(tmp_path):
    """Each look of the stall clock takes every rank's stack: the same late rank, still at the same step, is
    asked about again after 5 s, then 10, 20, 40 (not every second as the others' progress moves the spell);
    once it has stepped again, its next stop is asked about as soon as it is late."""
    (tmp_path / "meta.json").write_text('{"world_size": 2}')
    clock = StallClock(RunRecord(tmp_path))
    clock.observe([StepEvent(rank=1, t=T0, step=1), StepEvent(rank=0, t=T0, step=1)])

    def looks(seconds: range, rank1_steps: range = range(0)) -> list[int]:
        seen = []
        for second in seconds:
            clock.observe([StepEvent(rank=0, t=T0 + second, step=10 * second)]
                          + [StepEvent(rank=1, t=T0 + second, step=second) for _ in range(second in rank1_steps)])
            if (why := clock.check(training(), T0 + second + 0.5)) is not None:
                seen.append(second)
                assert why.startswith("no step from rank 1 for"), why
                clock.not_stuck(T0 + second + 0.5)  # the stacks showed rank 0 computing
        return seen

    assert looks(range(1, 61)) == [20, 25, 35, 55]
    assert looks(range(61, 111), rank1_steps=range(61, 71)) == [90, 95, 105]  # late again 20 s after step 70


def hook_record(tmp_path: Path, events: list[StepEvent], instrument: str = "1") -> RunRecord:
    record = RunRecord.create("hooked", tmp_path)
    record.write_meta(RunMeta.from_json({"run_id": record.run_id, "label": "train.py", "target": ["train.py"],
                                         "world_size": 2, "backend": "gloo", "started": T0,
                                         "env": {"MGTUTOR_INSTRUMENT": instrument}}))
    record.events_path.write_text("".join(json.dumps(e.to_json()) + "\n" for e in events))
    return record


def test_runs_show_says_each_ranks_last_hook_step_and_a_rank_without_one(tmp_path, capsys):
    record = hook_record(tmp_path, [hook_step(0, 0, 1, loss=2.5), hook_step(1, 0, 1, loss=2.4),
                                    hook_step(0, 1, 30, loss=1.25, samples_per_s=1234.5, mem_peak_mib=673.9)])
    assert cli_main(["runs", "show", str(record.path)]) == 0
    shown = capsys.readouterr().out
    assert ("  rank 0: step 30, 50 ms/step, data wait 1 ms, 1,234 samples/s, loss 1.25, peak memory 674 MiB\n"
            "  rank 1: step 1, 50 ms/step, data wait 1 ms, loss 2.4\n") in shown, shown
    only_zero = hook_record(tmp_path, [hook_step(0, 0, 1)])
    assert cli_main(["runs", "show", str(only_zero.path)]) == 0
    assert "  rank 1: no step logged\n" in capsys.readouterr().out


def test_runs_show_of_a_measured_script_without_steps_says_why(tmp_path, capsys):
    assert cli_main(["runs", "show", str(hook_record(tmp_path, []).path)]) == 0
    assert "steps    none: no optimizer steps were seen" in capsys.readouterr().out
    assert cli_main(["runs", "show", str(hook_record(tmp_path, [], instrument="0").path)]) == 0
    assert "steps " not in capsys.readouterr().out  # mgtutor's own workers, --no-instrument: nothing to say


def test_last_steps_reads_only_the_end_of_a_long_file(tmp_path):
    path = tmp_path / "events.jsonl"
    path.write_text("".join(json.dumps(hook_step(r, s, s).to_json()) + "\n" for s in range(1, 201) for r in (0, 1)))
    whole, partly = last_steps(path)
    assert {r: e.step for r, e in whole.items()} == {0: 200, 1: 200} and not partly
    tail, partly = last_steps(path, tail=1000)  # a few lines, the first one cut
    assert {r: e.step for r, e in tail.items()} == {0: 200, 1: 200} and partly
    assert last_steps(tmp_path / "none.jsonl") == ({}, False)


def test_the_monitor_says_each_ranks_own_step(tmp_path):
    state = training()
    state.ranks[0].last_step, state.ranks[1].last_step = 160, 1
    line = state_text(state, T0 + 5).plain.splitlines()[1]
    assert line.split() == ["r0", "step", "160", "r1", "step", "1"], line
    state.phase = "finished"
    for rank in state.ranks.values():
        rank.exit_code = 0
    assert state_text(state, T0 + 9).plain.splitlines()[1].split() == ["r0", "ok", "@160", "r1", "ok", "@1"]


def test_the_reports_step_time_is_the_hooks_own_step_time():
    events = [StepEvent(rank=0, t=T0 + 1, step=1, origin="hook", step_s=0.05, data_wait_s=0.01, compute_s=0.04),
              StepEvent(rank=0, t=T0 + 2, step=2, origin="hook", step_s=0.2, data_wait_s=0.01),
              StepEvent(rank=1, t=T0 + 2, step=2, compute_s=0.3, data_wait_s=0.1)]  # the trainer's
    step_time = next(c for c in step_charts(events, T0, gpu=False) if c.key == "step_time")
    assert step_time.series == [("rank 0", [1.0, 2.0], [0.05, 0.2]), ("rank 1", [2.0], [0.4])]
