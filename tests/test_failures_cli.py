"""`mgtutor diagnose` as a subprocess: JSON contract, exit codes; event-only kinds from a run record."""
from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
from mgtutor.training.runs.records.types import RunMeta, RunResult
from mgtutor.diagnostics.failures.classify import diagnose_run
from mgtutor.training.runs.records.record import RunRecord
from tests.conftest import mgtutor_argv, no_gpu_env

LOGS = Path(__file__).parent / "data" / "logs"


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(mgtutor_argv("diagnose", *args), capture_output=True, text=True, env=no_gpu_env(), timeout=60)


@pytest.mark.integration
def test_diagnose_log_files_json_and_exit_codes(tmp_path: Path) -> None:
    proc = _cli(str(LOGS / "nccl_init_timeout.log"), str(LOGS / "healthy.log"), "--json")
    assert proc.returncode == 0, proc.stderr
    findings = json.loads(proc.stdout)["findings"]
    assert findings[0]["kind"] == "nccl_init_timeout" and findings[0]["rank"] == 0
    assert findings[0]["evidence"][0]["line"] == 4
    healthy = _cli(str(LOGS / "healthy.log"), "--json")
    assert healthy.returncode == 0 and json.loads(healthy.stdout)["findings"] == []
    text = _cli(str(LOGS / "port_in_use_old.log"))
    assert text.returncode == 0 and "port_in_use" in text.stdout and "lesson: 04-ddp-torchrun" in text.stdout
    for bad in ([str(tmp_path / "missing.log")], [str(tmp_path)], [str(LOGS / "healthy.log"), str(tmp_path / "nope")]):
        proc = _cli(*bad)
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr


def _run_with_events(tmp_path: Path, events: list[dict]) -> RunRecord:
    record = RunRecord.create("events", tmp_path)
    record.write_meta(RunMeta.from_json({"world_size": 2, "started": time.time()}))
    record.write_result(RunResult.from_json({"status": "finished", "world_size": 2, "ranks": [], "first_failure": None}))
    record.events_path.write_text("".join(json.dumps(e) + "\n" for e in events) + "{torn\n")
    return record


def test_event_only_failures(tmp_path: Path) -> None:
    same = [{"rank": r, "t": 1.0, "type": "step", "step": s, "loss": 2.0 - s / 10, "data_wait_s": 0.001}
            for s in (1, 2, 3) for r in (0, 1)]
    assert [f.kind for f in diagnose_run(_run_with_events(tmp_path / "a", same))] == ["no_distributed_sampler"]
    slow = [dict(e, loss=e["loss"] + e["rank"], data_wait_s=0.4 if e["rank"] == 1 else 0.002) for e in same]
    found = diagnose_run(_run_with_events(tmp_path / "b", slow))
    assert [(f.kind, f.rank) for f in found] == [("straggler", 1)]
    nan = slow[:2] + [{"rank": 1, "t": 2.0, "type": "step", "step": 2, "loss": "nan"}]
    found = diagnose_run(_run_with_events(tmp_path / "c", nan))
    assert (found[0].kind, found[0].rank) == ("nan_loss", 1) and "step 2" in found[0].summary
    assert found[0].evidence[0]["file"] == "events.jsonl" and found[0].evidence[0]["line"] == 3
    healthy = [dict(e, loss=e["loss"] + e["rank"] / 7) for e in same]
    assert diagnose_run(_run_with_events(tmp_path / "d", healthy)) == []


def test_event_only_failures_in_chinese_say_their_numbers_in_chinese(tmp_path: Path) -> None:
    from mgtutor.training.foundation.i18n import set_language
    from tests.english_left import english_left

    same = [{"rank": r, "t": 1.0, "type": "step", "step": s, "loss": 2.0 - s / 10, "data_wait_s": 0.001}
            for s in (1, 2, 3) for r in (0, 1)]
    slow = [dict(e, loss=e["loss"] + e["rank"], data_wait_s=0.4 if e["rank"] == 1 else 0.002) for e in same]
    nan = slow[:2] + [{"rank": 1, "t": 2.0, "type": "step", "step": 2, "loss": "nan"}]
    set_language("zh")
    for name, events, says in (("a", same, "第 1, 2, 3 步"), ("b", slow, "0.400"), ("c", nan, "第 2 步")):
        summary = diagnose_run(_run_with_events(tmp_path / name, events))[0].summary
        assert says in summary and not english_left(summary), summary
