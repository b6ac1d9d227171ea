"""A plain DDP script with no mgtutor import, under a real `mgtutor run --nproc 2` (gloo, CPU): the ranks'
hook writes `step` events from both ranks; `--no-instrument` writes none (issue 43)."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from conftest import mgtutor_argv, no_gpu_env
from mgtutor.training.runs.events.reader import read_events
from mgtutor.training.runs.events.types import StepEvent

pytestmark = pytest.mark.integration  # starts processes

SCRIPT = Path(__file__).parent / "data" / "plain_ddp.py"


def run_plain(*flags: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    proc = subprocess.run(mgtutor_argv("run", *flags, "--nproc", "2", "--", str(SCRIPT)), capture_output=True,
                          text=True, timeout=240, env=no_gpu_env())
    assert proc.returncode == 0, proc.stderr + proc.stdout
    lines = [line for line in proc.stdout.splitlines() if line.startswith("run record: ")]
    return proc, Path(lines[0].removeprefix("run record: "))


def test_a_plain_ddp_script_gets_step_events_from_every_rank():
    proc, record = run_plain()
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


def test_no_instrument_writes_no_step_events():
    proc, record = run_plain("--no-instrument")
    assert "instrumentation on" not in proc.stderr
    events = record / "events.jsonl"
    assert not events.exists() or not [e for e in read_events(events) if isinstance(e, StepEvent)]
