"""Job files are written like mgtutor's own files (issue 27, items 5 and 6): never through a
symlink, never over an existing file unless --force, and no value slips past validation (a trailing
newline, non-ASCII digits, a negative count)."""
from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from mgtutor.tui.cli import main as cli_main

IMAGE = "nvcr.io/nvidia/pytorch:24.12-py3"


def slurm(*argv: str) -> int:
    return cli_main(["slurm", "--nodes", "2", *argv])


def test_an_existing_job_file_is_not_overwritten_silently(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "job.sbatch"
    out.write_text("my own notes\n")
    assert slurm("-o", str(out), "--", "train.py") == 2
    assert "is there already" in capsys.readouterr().err and out.read_text() == "my own notes\n"
    assert slurm("-o", str(out), "--force", "--", "train.py") == 0
    assert out.read_text().startswith("#!") and os.access(out, os.X_OK)


def test_submit_refuses_to_replace_name_sbatch(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mgtutor.sbatch").write_text("an older job\n")
    assert slurm("--submit", "--", "train.py") == 2  # refused before sbatch would run
    assert (tmp_path / "mgtutor.sbatch").read_text() == "an older job\n"
    assert "--force to replace it" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["slurm", "k8s"])
def test_a_symlink_at_the_output_is_never_followed(command: str, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    victim = tmp_path / "victim"
    victim.write_text("keep\n")
    os.chmod(victim, 0o600)
    link = tmp_path / "job.out"
    link.symlink_to(victim)
    argv = ["slurm", "--nodes", "2"] if command == "slurm" else ["k8s", "--image", IMAGE]
    assert cli_main([*argv, "-o", str(link), "--", "train.py"]) == 2
    assert "is a symlink already" in capsys.readouterr().err
    assert cli_main([*argv, "-o", str(link), "--force", "--", "train.py"]) == 0
    assert victim.read_text() == "keep\n" and stat.S_IMODE(victim.stat().st_mode) == 0o600  # not chmodded 0755
    assert not link.is_symlink() and link.read_text() != "keep\n"


@pytest.mark.parametrize("argv, said", [
    (["k8s", "--image", IMAGE, "--name", "job\n"], "--name"),
    (["k8s", "--image", IMAGE, "--namespace", "team\n"], "--namespace"),
    (["k8s", "--image", IMAGE, "--shm", "١٦Gi"], "--shm"),
    (["k8s", "--image", IMAGE, "--shm", "16Gi\n"], "--shm"),
    (["k8s", "--image", IMAGE, "--env", "A\n=1"], "--env"),
    (["slurm", "--nodes", "2", "--time", "３０"], "--time"),
    (["slurm", "--nodes", "2", "--cpus-per-node", "-4"], "--cpus-per-node must be at least 1"),
    (["slurm", "--nodes", "2", "--job-name", "x\n"], "--job-name"),
])
def test_hostile_values_are_refused_in_one_line(argv: list[str], said: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main([*argv, "--", "train.py"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and said in captured.err and captured.err.count("\n") == 1, captured.err
