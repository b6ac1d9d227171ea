"""Every demo that CPU ranks on gloo can produce runs for real, and the classifier names its cause first.
The crash demo is read from the Chinese `mgtutor demo crash` that the Chinese leak test reads too (one run per
worker: tests/demo_runs.py); what is checked here is language-free (exit code, rank lines, the record, the
JSON of `mgtutor diagnose`). The trainer demos' runs (`INJECT_OF`) are the runs test_train_inject.py checks its
`--inject` modes on: each is made once (`demo_run`, xdist group `demo_NAME`) for both tests. The port-in-use demo runs
from the Troubleshoot screen, where the same is checked on it (test_troubleshoot_screen.py::
test_demo_runs_for_real_and_shows_the_diagnosis)."""
from __future__ import annotations

import json
import subprocess

import pytest

from mgtutor.diagnostics.failures.demos import SCENARIOS
from tests.conftest import mgtutor_argv, no_gpu_env
from tests.demo_runs import INJECT_OF, demo_group, demo_run, zh_demo_crash_run  # noqa: F401 - fixtures: shared runs

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture(autouse=True)
def cpu_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")


@pytest.mark.parametrize("name", [pytest.param(s.name, marks=[demo_group(s.name)] if s.name in INJECT_OF else [])
                                  for s in SCENARIOS.values() if s.cpu_ok and s.name not in ("crash", "port-in-use")])
def test_demo_is_diagnosed(name: str, demo_run) -> None:
    done = demo_run(name)  # run_demo(name, nproc=2 (ONE_RANK: 1), backend="gloo"), shared with test_train_inject.py
    outcome, lines = done.outcome, done.lines
    kinds = [f.kind for f in outcome.findings]
    assert outcome.diagnosed, f"{name}: expected {outcome.scenario.expect} first, got {kinds}"
    assert lines, "the demo streamed no log line"
    assert not outcome.run.running()
    first = outcome.findings[0]
    assert first.evidence and first.lesson
    if name == "never-joins":
        assert first.rank == 1  # the injected rank, not the one that reported it


@demo_group("crash")
def test_the_crash_demo_is_diagnosed_and_diagnose_gives_it_as_json(zh_demo_crash_run) -> None:
    """`mgtutor demo crash` (run_demo through the CLI): exit 0 only when the classifier named the cause
    first; then the same run through `mgtutor diagnose --json`: the JSON contract, exit 0 with findings."""
    from mgtutor.training.runs.records.record import RunRecord, RunStatus

    done = zh_demo_crash_run
    assert done.proc.returncode == 0, done.proc.stdout[-3000:] + done.proc.stderr[-2000:]  # diagnosed
    assert "[rank 1] " in done.proc.stdout, "the demo streamed no log line"
    assert RunRecord(done.record).status() == RunStatus.FAILED  # it ended
    proc = subprocess.run(mgtutor_argv("diagnose", str(done.record), "--json"), capture_output=True, text=True,
                          env={**no_gpu_env(), **done.env}, timeout=60)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    first = data["findings"][0]
    assert first["kind"] == SCENARIOS["crash"].expect == "child_failed"
    assert first["rank"] == 1  # the injected rank, not the one that reported it
    assert first["evidence"] and first["lesson"]
    assert {"kind", "rank", "summary", "fix", "evidence", "lesson"} <= first.keys()
    assert {"file", "line", "text"} <= first["evidence"][0].keys()
