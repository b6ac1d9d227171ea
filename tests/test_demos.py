"""Every demo that CPU ranks on gloo can produce runs for real, and the classifier names its cause first."""
from __future__ import annotations

import json
import subprocess

import pytest

from mgtutor.diagnostics.failures.demos import SCENARIOS, run_demo
from tests.conftest import mgtutor_argv, no_gpu_env

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture(autouse=True)
def cpu_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")


@pytest.mark.parametrize("name", [s.name for s in SCENARIOS.values() if s.cpu_ok])
def test_demo_is_diagnosed(name: str) -> None:
    lines: list[str] = []
    outcome = run_demo(name, nproc=2, backend="gloo", on_line=lambda r, s, line: lines.append(line))
    kinds = [f.kind for f in outcome.findings]
    assert outcome.diagnosed, f"{name}: expected {outcome.scenario.expect} first, got {kinds}"
    assert lines, "the demo streamed no log line"
    assert not outcome.run.running()
    first = outcome.findings[0]
    assert first.evidence and first.lesson
    if name in ("crash", "never-joins"):
        assert first.rank == 1  # the injected rank, not the one that reported it
    if name == "crash":  # the same run through the CLI: JSON contract, exit 0 with findings
        proc = subprocess.run(mgtutor_argv("diagnose", str(outcome.run.record.path), "--json"),
                              capture_output=True, text=True, env=no_gpu_env(), timeout=60)
        assert proc.returncode == 0, proc.stderr
        data = json.loads(proc.stdout)
        assert data["findings"][0]["kind"] == "child_failed"
        assert {"kind", "rank", "summary", "fix", "evidence", "lesson"} <= data["findings"][0].keys()
        assert {"file", "line", "text"} <= data["findings"][0]["evidence"][0].keys()
