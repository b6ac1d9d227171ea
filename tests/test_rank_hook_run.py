"""A plain DDP script with no mgtutor import, under a real `mgtutor run --nproc 2` (gloo, CPU): the ranks'
hook writes `step` events from both ranks; `--no-instrument` writes none; a rank whose steps stop while
the other's go on is named while the run goes (issue 43). The plain_ddp.py run is shared with every test
that reads its record (the `plain_ddp_run` fixture, tests/hook_runs.py); the other two start their real
ranks through the stand-in torchrun."""
from __future__ import annotations

import pytest
from mgtutor.training.runs.events.reader import read_events
from mgtutor.training.runs.events.types import StepEvent
from mgtutor.training.runs.launch.procs import run_processes
from tests.hook_runs import DATA, PLAIN_DDP, mgtutor_run

pytestmark = pytest.mark.integration  # starts processes


@pytest.mark.xdist_group("plain_ddp")
def test_a_plain_ddp_script_gets_step_events_from_every_rank(plain_ddp_run):
    proc, record = plain_ddp_run.proc, plain_ddp_run.record
    assert "instrumentation on" in proc.stderr
    assert "instrumentation off" not in proc.stderr + proc.stdout
    steps = [e for e in read_events(record / "events.jsonl") if isinstance(e, StepEvent)]
    for rank in (0, 1):
        mine = [e for e in steps if e.rank == rank]
        assert [e.step for e in mine][0] == 1 and mine[-1].step == 30, mine
        for event in mine:
            assert event.origin == "hook" and event.step_s is not None and event.step_s > 0
            assert event.data_wait_s is not None and event.samples_per_s is not None and event.samples_per_s > 0
            assert isinstance(event.loss, float) and event.mem_peak_mib is not None


def test_no_instrument_writes_no_step_events(tmp_path, monkeypatch, standin_torchrun):
    """One rank, 3 steps, through the stand-in torchrun: whether the hook is installed is the rank wrapper's
    own choice in each rank (the hook under the real torchrun, two ranks: the plain_ddp_run tests)."""
    monkeypatch.setenv("PLAIN_DDP_STEPS", "3")
    run = mgtutor_run(tmp_path, PLAIN_DDP, "--no-instrument", nproc=1)
    assert "instrumentation on" not in run.proc.stderr
    events = run.record / "events.jsonl"
    assert not events.exists() or not [e for e in read_events(events) if isinstance(e, StepEvent)]


def test_a_rank_that_stops_stepping_while_the_other_goes_on_is_named(tmp_path, standin_torchrun):
    """Rank 1 steps 3 times and waits at a barrier; rank 0 (a model of its own, no all-reduce) steps on for
    about 8 s: the live warning names rank 1 and rank 0's progress, before the run ends by itself. The ranks
    (real torch and gloo) start through the stand-in torchrun: the warning is mgtutor's own."""
    run = mgtutor_run(tmp_path, DATA / "plain_rank_stops.py")
    warnings = [line for line in run.proc.stderr.splitlines() if line.startswith("mgtutor: warning (straggler)")]
    assert warnings, run.proc.stderr
    assert "rank 1 has logged no step for" in warnings[0] and "while rank 0 went on to step" in warnings[0], warnings
    assert not any("rank 0 has logged no step" in line for line in warnings)
    steps = [e for e in read_events(run.record / "events.jsonl") if isinstance(e, StepEvent)]
    assert max(e.step for e in steps if e.rank == 0) == 160 and max(e.step for e in steps if e.rank == 1) == 3
    assert run_processes(run.record.name) == []  # every rank reaped
