"""Rank and node counts a machine cannot run are refused with the reason, before any run folder exists
(issue 46, item 14): `--nproc 10000` on a box of a few cores, a 20-digit `--nproc` or `--nnodes`."""
from __future__ import annotations

import pytest

from mgtutor.training.runs.launch.launcher import CPU_RANKS_PER_CORE, LaunchError, LaunchSpec, plan, usable_cores
from mgtutor.training.runs.records.record import runs_root
from mgtutor.tui.cli import main as cli_main

TWENTY_DIGITS = "1" + "0" * 19


def test_more_cpu_ranks_than_the_cores_can_take_are_refused_with_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")
    most = CPU_RANKS_PER_CORE * usable_cores()
    assert plan(LaunchSpec(target=[], nproc=most, backend="gloo")).nproc == most
    with pytest.raises(LaunchError) as refused:
        plan(LaunchSpec(target=[], nproc=10000, backend="gloo"))
    said = str(refused.value)
    assert f"{usable_cores()} usable core(s) take at most {most}" in said and f"use --nproc {most}" in said


@pytest.mark.parametrize("argv, said", [
    (["run", "--nproc", "10000"], "--nproc 10000 asks for more CPU ranks than this machine can run"),
    (["run", "--nproc", TWENTY_DIGITS], f"--nproc {TWENTY_DIGITS} asks for more CPU ranks"),
    (["train", "--nproc", TWENTY_DIGITS], f"--nproc {TWENTY_DIGITS} asks for more CPU ranks"),
    (["run", "--nnodes", TWENTY_DIGITS, "--rdzv-endpoint", "127.0.0.1:29400"],
     f"--nnodes {TWENTY_DIGITS} is more nodes than a job can have"),
])
def test_a_count_this_machine_cannot_run_is_one_line_and_no_run_folder(
        argv: list[str], said: str, tmp_path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")
    script = tmp_path / "train.py"
    script.write_text("print('hi')\n")
    target = ["--", str(script)] if argv[0] == "run" else []
    assert cli_main([*argv, *target]) == 2
    err = capsys.readouterr().err
    assert said in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not runs_root().exists() or list(runs_root().iterdir()) == []
