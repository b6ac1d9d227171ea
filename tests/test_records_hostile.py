"""A broken run record never breaks the tool (issue 27, items 1–3, 5 and 13): a run folder of mode
000, a FIFO or device where a file should be, JSON of the wrong type, a symlinked runs/ folder.
Every command answers with one line (never a traceback, never a hang) and lists every other run.
Mode-000 cases run with root's file-mode capabilities dropped (tests/unprivileged.py)."""
from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from mgtutor.training.runs.events.reader import EventReader
from mgtutor.training.runs.records.record import RunMeta, RunRecord, list_runs, runs_root, write_json_atomic
from mgtutor.training.foundation.safe_io import UnsafePath, open_private, read_regular
from mgtutor.training.runs.follow.samples import read_samples
from mgtutor.training.runs.forensics.stacks import load_index
from mgtutor.training.runs.follow.tail import RunTail
from mgtutor.tui.cli import main as cli_main
from tests.unprivileged import modes_apply, without_dac_override

pytestmark = pytest.mark.timeout(60)  # a FIFO opened for reading would block: fail, do not hang


def good_run(label: str = "good") -> RunRecord:
    record = RunRecord.create(label)
    record.write_meta(RunMeta.from_json({"run_id": record.run_id, "label": label, "target": ["t.py"],
                                         "world_size": 2, "backend": "gloo", "started": 1.7e9, "status": "finished"}))
    write_json_atomic(record.path / "result.json", {"run_id": record.run_id, "status": "finished", "world_size": 2,
                                                    "ranks": [], "duration_s": 1.5})
    return record


@pytest.fixture
def unreadable_run() -> RunRecord:
    record = good_run("locked")
    os.chmod(record.path, 0)
    yield record
    os.chmod(record.path, 0o700)


def test_a_mode_000_run_is_listed_as_unreadable_and_hides_no_other(unreadable_run: RunRecord,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    other = good_run()
    with without_dac_override():
        assert modes_apply(str(unreadable_run.path))
        assert cli_main(["runs"]) == 0
        text = capsys.readouterr().out
        assert cli_main(["runs", "--json"]) == 0
        listed = {run["id"]: run for run in json.loads(capsys.readouterr().out)}
        assert cli_main(["runs", "show", unreadable_run.run_id]) == 0
        shown = capsys.readouterr().out
        assert cli_main(["diagnose", other.run_id]) == 0
        capsys.readouterr()
        assert cli_main(["diagnose", unreadable_run.run_id]) == 2
        refused = capsys.readouterr().err
    assert other.run_id in text and unreadable_run.run_id in text and "unreadable in part: meta.json" in text
    assert "Permission denied" in listed[unreadable_run.run_id]["problem"] and listed[unreadable_run.run_id]["unreadable"]
    assert next(line for line in text.splitlines() if line.startswith(unreadable_run.run_id)).split()[1] == "unreadable"
    assert listed[other.run_id]["status"] == "finished" and "problem" not in listed[other.run_id]
    assert "meta.json is unreadable" in shown
    assert refused.count("\n") == 1 and "cannot read run" in refused and "Permission denied" in refused


@pytest.mark.parametrize("how", ["a file", "a symlink", "not writable"])
def test_a_broken_runs_folder_is_one_line_from_mgtutor_run(how: str, tmp_path: Path, write_script,
                                                           capsys: pytest.CaptureFixture[str],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")
    script = write_script("train.py", "print('hi')\n")
    root = runs_root()
    root.parent.mkdir(parents=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    if how == "a file":
        root.write_text("not a folder")
    elif how == "a symlink":
        root.symlink_to(elsewhere)
    else:
        root.mkdir(mode=0o500)
    with without_dac_override():
        code = cli_main(["run", "--", str(script)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "cannot keep the run record" in err, err
    assert list(elsewhere.iterdir()) == []  # nothing written through the link
    said = {"a file": "not a folder", "a symlink": "is a symlink", "not writable": "Permission denied"}[how]
    assert said in err


def test_a_symlinked_runs_folder_is_refused_and_its_target_untouched(tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.mkdir()
    runs_root().parent.mkdir(parents=True)
    runs_root().symlink_to(target)
    with pytest.raises(UnsafePath, match="is a symlink"):
        RunRecord.create("x")
    assert list(target.iterdir()) == []


def test_files_are_never_written_through_a_symlink(tmp_path: Path) -> None:
    record = good_run()
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    os.chmod(victim, 0o644)
    log = record.rank_log(0, "stdout")
    log.symlink_to(victim)
    with pytest.raises(UnsafePath):
        open_private(log, append=True)
    (record.path / "meta.json").unlink()
    (record.path / "meta.json").symlink_to(victim)
    record.write_meta(RunMeta(run_id=record.run_id))  # the link is replaced, never followed
    assert victim.read_text() == "keep me\n" and stat.S_IMODE(victim.stat().st_mode) == 0o644
    assert not (record.path / "meta.json").is_symlink()


def test_records_are_0600_files_in_0700_folders_whatever_the_umask() -> None:
    old = os.umask(0o022)
    try:
        record = good_run()
        os.close(open_private(record.rank_log(0, "stdout"), append=True))
    finally:
        os.umask(old)
    for folder in (runs_root().parent, runs_root(), record.path, record.path / "logs", record.path / "ranks"):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder
    for path in (record.path / "meta.json", record.path / "result.json", record.rank_log(0, "stdout")):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path


def _fifo_run() -> RunRecord:
    record = good_run("fifo")
    capture = record.path / "stacks" / "20260101-000000-1-hang"
    capture.mkdir(parents=True)
    for path in (record.rank_log(0, "stdout"), record.events_path, record.torchrun_log,
                 record.path / "samples.jsonl", capture / "index.json", capture / "rank0.txt"):
        os.mkfifo(path)
    return record


def test_fifos_in_a_run_never_hang_a_reader(capsys: pytest.CaptureFixture[str]) -> None:
    record = _fifo_run()
    assert RunTail(record).drain() == []  # the FIFOs are skipped, not waited on
    assert EventReader(record.events_path).poll() == []
    assert read_samples(record) == [] and load_index(record.path / "stacks" / "20260101-000000-1-hang") == {}
    assert cli_main(["diagnose", record.run_id]) == 0
    assert cli_main(["runs", "show", record.run_id]) == 0
    out = capsys.readouterr().out
    assert "No known failure found" in out and record.run_id in out


def test_a_fifo_meta_or_result_is_said_to_be_one(capsys: pytest.CaptureFixture[str]) -> None:
    record = good_run("fifo-meta")
    for name in ("meta.json", "result.json"):
        (record.path / name).unlink()
        os.mkfifo(record.path / name)
    assert cli_main(["runs", "--json"]) == 0
    (listed,) = json.loads(capsys.readouterr().out)
    assert "meta.json is unreadable (meta.json is a FIFO (named pipe), not a file)" in listed["problem"]


@pytest.mark.parametrize("make, kind", [("fifo", "a FIFO (named pipe)"), ("zero", "a character device"),
                                        ("dir", "a directory")])
def test_diagnose_check_and_run_say_what_a_non_file_is(make: str, kind: str, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")
    path = {"fifo": tmp_path / "x.py", "zero": Path("/dev/zero"), "dir": tmp_path / "proj"}[make]
    if make == "fifo":
        os.mkfifo(path)
    elif make == "dir":
        path.mkdir()
    assert cli_main(["diagnose", str(path)]) == 2
    assert f"it is {kind}" in capsys.readouterr().err
    assert cli_main(["run", "--", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"is {kind}, not a script" in err
    if make == "fifo":
        assert cli_main(["check", str(path)]) == 2
        assert "FIFO" in capsys.readouterr().err


@pytest.mark.parametrize("name, data, said", [
    ("result.json", {"status": "failed", "first_failure": 5}, "first_failure is 5"),
    ("meta.json", {"started": "yesterday", "world_size": 2}, "started is 'yesterday'"),
    ("meta.json", {"target": None, "world_size": 2}, "target is None"),
    ("meta.json", {"devices": "gpu0", "env": {"A": 1}}, "devices is 'gpu0', env is {'A': 1}"),
    ("result.json", {"duration_s": [1], "ranks": 3}, "duration_s is [1], ranks is 3"),  # keys sorted on disk
])
def test_json_of_the_wrong_type_is_dropped_and_said(name: str, data: dict, said: str,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    good_run("fine")
    record = good_run("typed")
    write_json_atomic(record.path / name, data)
    assert cli_main(["runs"]) == 0
    listing = capsys.readouterr().out
    assert cli_main(["runs", "show", record.run_id]) == 0
    shown = capsys.readouterr().out
    assert cli_main(["runs", "show", record.run_id, "--json"]) == 0
    as_json = json.loads(capsys.readouterr().out)
    assert cli_main(["diagnose", record.run_id]) == 0
    assert len(list(list_runs())) == 2 and said in listing and said in shown and said in as_json["problem"]


def test_runs_are_picked_by_a_whole_id_or_four_characters_at_least(capsys: pytest.CaptureFixture[str]) -> None:
    first, second = good_run("alpha"), good_run("beta")
    assert cli_main(["runs", "show", "2"]) == 2
    assert "too short to pick a run" in capsys.readouterr().err
    assert cli_main(["runs", "show", first.run_id[:8]]) == 2  # both start with the date
    assert "matches 2 runs" in capsys.readouterr().err
    assert cli_main(["runs", "show", second.run_id[-4:]]) == 0
    assert second.run_id in capsys.readouterr().out
    assert cli_main(["runs", "show", first.run_id]) == 0


def test_attach_to_a_folder_that_is_no_run_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["runs", "attach", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "is no run directory" in err and "None" not in err


def test_a_run_without_numbers_is_described_without_none() -> None:
    from mgtutor.training.runs.records.types import RunResult, RunStatus

    assert RunResult(status=RunStatus.LOST).describe() == "run lost"
    assert read_regular(good_run().path / "meta.json").startswith(b"{")


def test_lesson_progress_is_private_too() -> None:
    from mgtutor.lessons.progress import Progress

    old = os.umask(0o022)
    try:
        progress = Progress()
        progress.save()
    finally:
        os.umask(old)
    assert stat.S_IMODE(progress.path.stat().st_mode) == 0o600
    assert stat.S_IMODE(progress.path.parent.stat().st_mode) == 0o700


def test_attach_to_an_ended_run_with_fifo_logs_returns(capsys: pytest.CaptureFixture[str]) -> None:
    record = _fifo_run()
    assert cli_main(["runs", "attach", record.run_id]) == 0
    captured = capsys.readouterr()
    assert "has ended" in captured.err and f"run record: {record.path}" in captured.out


def test_a_rank_never_writes_its_logs_through_a_symlinked_logs_folder(tmp_path: Path) -> None:
    from mgtutor.training.runs.launch.rank import open_rank_logs

    record = good_run("ranklogs")
    out, err = open_rank_logs(record, 0)
    out.close()
    err.close()
    assert stat.S_IMODE(record.rank_log(0, "stderr").stat().st_mode) == 0o600
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for log in (record.path / "logs").iterdir():
        log.unlink()
    (record.path / "logs").rmdir()
    (record.path / "logs").symlink_to(elsewhere)
    with pytest.raises(UnsafePath, match="is a symlink"):
        open_rank_logs(record, 0)
    assert list(elsewhere.iterdir()) == []


def test_a_runs_folder_that_cannot_be_listed_is_said_so(capsys: pytest.CaptureFixture[str]) -> None:
    runs_root().parent.mkdir(parents=True)
    runs_root().write_text("a file")
    assert cli_main(["runs"]) == 2
    assert "cannot list" in capsys.readouterr().err
    runs_root().unlink()
    assert cli_main(["runs"]) == 0
    assert "no runs yet" in capsys.readouterr().out
