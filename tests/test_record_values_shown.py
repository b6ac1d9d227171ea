"""A record's impossible values are shown as unknown or invalid, never as they are (issue 46, item 15):
a world size of -5, a NaN duration, a signal no kernel has. Names mgtutor itself writes stay as written."""
from __future__ import annotations

import pytest

from mgtutor.training.runs.records.record import RunMeta, RunRecord, write_json_atomic
from mgtutor.tui.cli import main as cli_main


def forged(ranks: list[dict], world_size: int = 1, duration: str = "3.5") -> RunRecord:
    record = RunRecord.create("forged")
    record.write_meta(RunMeta.from_json({"run_id": record.run_id, "label": "forged", "target": ["t.py"],
                                         "world_size": world_size, "backend": "gloo", "started": 1.7e9,
                                         "ended": 1.7e9 + 3.5, "status": "failed"}))
    first = next(({"rank": r["rank"], "signal": r.get("signal"), "exit_code": r.get("exit_code")} for r in ranks), None)
    write_json_atomic(record.path / "result.json", {"run_id": record.run_id, "status": "failed", "backend": "gloo",
                                                    "world_size": world_size, "ranks": ranks, "first_failure": first,
                                                    "duration_s": 3.5})
    if duration != "3.5":  # JSON has no NaN: only a hand-written file holds one
        path = record.path / "result.json"
        path.write_text(path.read_text().replace('"duration_s": 3.5', f'"duration_s": {duration}'))
    return record


def said(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    cli_main(list(argv))
    captured = capsys.readouterr()
    return captured.out + captured.err


def test_a_signal_no_kernel_has_is_shown_as_an_unknown_exit(capsys: pytest.CaptureFixture[str]) -> None:
    record = forged([{"rank": 0, "signal": "SIGFOO", "exit_code": None, "outcome": "failed", "ended": 1.7e9 + 3}])
    shown = said(capsys, "runs", "show", record.run_id)
    assert "rank 0: exit unknown (failed)" in shown and "signal SIGFOO" not in shown
    assert "ranks[0].signal is 'SIGFOO'" in shown  # named as the invalid value it is
    diagnosis = said(capsys, "diagnose", record.run_id)
    assert "an exit the record does not say" in diagnosis and "SIGFOO" not in diagnosis


@pytest.mark.parametrize("name", ["SIGTERM", "SIGKILL", "SIGRTMIN+5", "signal 77"])
def test_the_signal_names_the_rank_wrapper_writes_are_shown_as_written(name: str,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    record = forged([{"rank": 0, "signal": name, "exit_code": None, "outcome": "failed", "ended": 1.7e9 + 3}])
    assert f"rank 0: signal {name} (failed)" in said(capsys, "runs", "show", record.run_id)


def test_a_world_size_of_minus_5_is_unknown(capsys: pytest.CaptureFixture[str]) -> None:
    record = forged([], world_size=-5)
    shown = said(capsys, "runs", "show", record.run_id)
    assert "ranks    unknown on gloo" in shown and "-5 on" not in shown
    listed = said(capsys, "runs")
    row = next(line for line in listed.splitlines() if line.startswith(record.run_id))
    assert " -5 " not in row and " ? " in row


def test_a_nan_duration_is_not_shown(capsys: pytest.CaptureFixture[str]) -> None:
    record = forged([], duration="NaN")
    for argv in (["runs"], ["runs", "show", record.run_id]):
        shown = said(capsys, *argv).replace(str(record.path), "")
        assert "nan" not in shown.lower().replace("nan is not a json number", "")
        assert "NaN is not a JSON number" in shown  # why result.json is left out
