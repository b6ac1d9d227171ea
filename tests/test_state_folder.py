"""A state folder mgtutor cannot write: `doctor` says so in its report and one line, never a traceback;
`diagnose` says the runs folder cannot be read instead of "no runs yet" (issue 46, item 12)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from mgtutor.diagnostics.doctor.checks import state_folder_checks
from mgtutor.diagnostics.doctor.state_folder import state_folder_facts
from mgtutor.tui.cli import main as cli_main
from tests.conftest import mgtutor_argv, no_gpu_env
from tests.unprivileged import modes_apply, without_dac_override

ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
AS_IF_UNPRIVILEGED = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search"]  # root, but file modes apply


def _a_file(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "state-file").write_text("not a folder")
    return {"XDG_STATE_HOME": str(tmp_path / "state-file")}


def _mode_000(tmp_path: Path) -> dict[str, str]:
    folder = tmp_path / "closed"
    folder.mkdir(mode=0)
    return {"XDG_STATE_HOME": str(folder)}


UNWRITABLE: dict[str, Callable[[Path], dict[str, str]]] = {
    "a file": _a_file,
    "/dev/null": lambda tmp_path: {"XDG_STATE_HOME": os.devnull},
    "a home that does not exist": lambda tmp_path: {"XDG_STATE_HOME": "", "HOME": "/proc/nonexistent"},
    "mode 000": _mode_000,
}
SAID = {"a file": "Not a directory", "/dev/null": "Not a directory",
        "a home that does not exist": "No such file or directory", "mode 000": "Permission denied",
        "a read-only disk": "Read-only file system"}


@pytest.fixture
def read_only_disk(tmp_path: Path) -> Iterator[dict[str, str]]:
    point = tmp_path / "ro"
    point.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(point)], capture_output=True,
                          text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    yield {"XDG_STATE_HOME": str(point)}
    subprocess.run(["umount", "-l", str(point)], check=False)


def _use(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in env.items():
        if value:
            monkeypatch.setenv(name, value)
        else:
            monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize("name", list(UNWRITABLE))
def test_the_doctors_state_folder_check_fails_with_the_reason(name: str, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    env = UNWRITABLE[name](tmp_path)
    _use(env, monkeypatch)
    with without_dac_override():  # as root too, mode 000 stops this thread
        if name == "mode 000" and not modes_apply(env["XDG_STATE_HOME"]):
            pytest.skip("file modes do not apply here")
        facts = state_folder_facts()
    assert facts["problem"] and SAID[name] in facts["problem"]
    (check,) = state_folder_checks(facts)
    assert check["status"] == "fail" and "XDG_STATE_HOME" in check["fix"]


def test_a_writable_state_folder_says_its_room(tmp_path: Path) -> None:
    facts = state_folder_facts()
    assert facts["problem"] is None and facts["free_mib"] is not None
    assert [c["status"] for c in state_folder_checks(facts)] in (["ok"], ["warn"])


@pytest.mark.parametrize("name", ["a file", "/dev/null"])
def test_diagnose_says_the_runs_folder_cannot_be_read(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    _use(UNWRITABLE[name](tmp_path), monkeypatch)
    assert cli_main(["diagnose"]) == 2
    err = capsys.readouterr().err
    assert "cannot list" in err and SAID[name] in err and "no runs yet" not in err


def test_diagnose_says_a_closed_runs_folder_cannot_be_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from mgtutor.training.runs.records.record import runs_root

    runs_root().mkdir(parents=True)
    runs_root().chmod(0)
    try:
        with without_dac_override():
            if not modes_apply(str(runs_root())):
                pytest.skip("file modes do not apply here")
            assert cli_main(["diagnose"]) == 2
    finally:
        runs_root().chmod(0o700)
    err = capsys.readouterr().err
    assert "Permission denied" in err and "no runs yet" not in err


@pytest.mark.integration
@pytest.mark.parametrize("name", ["a file", "mode 000"])
def test_doctor_with_an_unwritable_state_folder_reports_it_in_one_line(
        name: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """`mgtutor doctor` as a user runs it, its torch facts from a child process: a state folder that is a file,
    and one of mode 000 (as root, with the capability that passes file modes dropped). Every case, and
    --json, through the same command in process: test_doctor_in_process_with_an_unwritable_state_folder_…"""
    env = UNWRITABLE[name](tmp_path)
    full = {**no_gpu_env(), **env}
    full = {key: value for key, value in full.items() if value}
    unprivileged = AS_IF_UNPRIVILEGED if name == "mode 000" and ROOT else []
    if unprivileged and shutil.which("setpriv") is None:
        pytest.skip("no setpriv(1) to make mode 000 apply to root")
    done = subprocess.run([*unprivileged, *mgtutor_argv("doctor")], env=full, capture_output=True, text=True,
                          timeout=120)
    assert "Traceback" not in done.stderr + done.stdout, done.stderr
    assert done.returncode == 1  # the state folder check fails
    (note,) = [line for line in done.stderr.splitlines() if "not kept" in line]
    assert SAID[name] in note
    assert "mgtutor cannot keep runs or reports" in done.stdout


@pytest.mark.integration  # the torch facts come from the doctor's own run (doctor_runs), shared with its readers
@pytest.mark.xdist_group("doctor")
@pytest.mark.parametrize("name", [*UNWRITABLE, "a read-only disk"])
def test_doctor_in_process_with_an_unwritable_state_folder_reports_it_in_one_line(
        name: str, tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str], doctor_runs) -> None:
    """The doctor command's own main in process, the torch facts of a real `mgtutor doctor --json` (what its
    child process found on this machine) given to it instead of asking a child again."""
    from mgtutor.diagnostics.doctor import versions

    facts = json.loads(doctor_runs["english json"].stdout)["torch"]
    assert facts.get("torch"), facts  # a real run's facts
    env = request.getfixturevalue("read_only_disk") if name == "a read-only disk" else UNWRITABLE[name](tmp_path)
    _use({**env, "MGTUTOR_NO_NVML": "1"}, monkeypatch)
    monkeypatch.setattr(versions, "gather", lambda *args, **kwargs: facts)
    with without_dac_override():  # as root too, mode 000 stops this thread
        if name == "mode 000" and not modes_apply(env["XDG_STATE_HOME"]):
            pytest.skip("file modes do not apply here")
        for json_flag in ([], ["--json"]):
            assert cli_main(["doctor", *json_flag]) == 1  # the state folder check fails (no traceback: it returns)
            done = capsys.readouterr()
            assert "Traceback" not in done.err + done.out, done.err
            (note,) = [line for line in done.err.splitlines() if "not kept" in line]
            assert SAID[name] in note
            if json_flag:
                checks = {c["id"]: c for c in json.loads(done.out)["checks"]}
                assert checks["state_folder"]["status"] == "fail" and SAID[name] in checks["state_folder"]["message"]
            else:
                assert "mgtutor cannot keep runs or reports" in done.out
