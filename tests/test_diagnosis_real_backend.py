"""NCCL asked for through a variable, on a machine without a GPU, in a real run: the diagnosis names the
variable, its line and the script's own override (a configurator's `--backend=gloo`, an argparse option),
never "run check --fix" alone, and the command it gives trains on gloo.

The configurator's runs are two ranks (a 2-rank failure diagnosed: tests/README.md points here, and its override
training on 2 gloo ranks); the argparse script's are one: every rank fails alike at the same line and the diagnosis
is one rank's, and the backend each rank asks for is its own reading of its arguments. The command a diagnosis
gives names the --nproc of the run it diagnosed, and is run as given.

Every run starts its ranks through the stand-in torchrun: the ranks are the real script on real torch and gloo,
and what is checked is their failure, mgtutor's diagnosis of it and the override training (a failing run diagnosed
amid the real torchrun's own output: test_demos.py's crash demo, test_cli_run.py)."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.userscript_cli import mgtutor

pytestmark = pytest.mark.integration  # starts the stand-in torchrun (torchrun for nanoGPT's) and their ranks

DATA = Path(__file__).parent / "data" / "run_failures"
NANOGPT = Path(__file__).parent / "data" / "corpus" / "nanogpt"  # fetched by tests/bench/corpus_get.py


def diagnosis_of(out: str) -> tuple[str, str]:
    """The diagnosis line `mgtutor run` prints for a failed run, and its fix."""
    lines = out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("diagnosis: "))
    return lines[at], lines[at + 1]


def line_of(path: Path, text: str) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def run_the_fix(fix: str, nproc: int, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The command the fix gives for a run on `nproc` ranks, run as given."""
    command = re.search(rf"`mgtutor run (--nproc {nproc} -- [^`]+)`", fix)
    assert command, fix
    return mgtutor("run", *command[1].split(), cwd=cwd)


@pytest.mark.parametrize("folder, nproc, assignment, override", [
    ("config_backend", 2, "backend = 'nccl'", "--backend=gloo"),
    ("argparse_backend", 1, 'parser.add_argument("--dist-backend"', "--dist-backend gloo"),
], ids=["configurator", "argparse"])
def test_the_variable_its_line_and_the_scripts_override_are_named_and_the_override_trains(
        tmp_path, standin_torchrun, folder, nproc, assignment, override):
    work = tmp_path / folder
    shutil.copytree(DATA / folder, work)
    failed = mgtutor("run", "--nproc", str(nproc), "--", "train.py", cwd=work)
    assert failed.returncode != 0
    summary, fix = diagnosis_of(failed.stdout + failed.stderr)
    assert summary.startswith("diagnosis: nccl_without_gpu")
    assert f"train.py:{line_of(work / 'train.py', assignment)}" in summary
    assert f"init_process_group at train.py:{line_of(work / 'train.py', 'init_process_group(')}" in summary
    assert f"`{override}`" in fix and "does not rewrite it" in fix
    assert not fix.startswith("  fix: The script chooses NCCL itself")  # the advice that failed before

    fixed = run_the_fix(fix, nproc, cwd=work)
    assert fixed.returncode == 0, fixed.stdout[-3000:]
    assert "diagnosis:" not in fixed.stdout


@pytest.mark.skipif(not (NANOGPT / "train.py").is_file(), reason="the corpus is not fetched (tests/bench/corpus_get.py)")
def test_nanogpts_own_train_py_is_told_its_configurators_flag(tmp_path):
    work = tmp_path / "nanogpt"
    shutil.copytree(NANOGPT, work)
    failed = mgtutor("run", "--nproc", "2", "--", "train.py", cwd=work)
    summary, fix = diagnosis_of(failed.stdout + failed.stderr)
    assert f"`backend`, set to 'nccl' at train.py:{line_of(work / 'train.py', 'backend = ')}" in summary
    assert "`--backend=gloo`: `mgtutor run --nproc 2 -- train.py --backend=gloo`" in fix
