"""The chain a user walks on a machine without a GPU: the run fails, the diagnosis names the script's
own CUDA line and shows the patch, `check --fix` writes it, the next run gets past device setup."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import mgtutor_argv, no_gpu_env

pytestmark = pytest.mark.integration  # starts torchrun

FIX = Path(__file__).parent / "data" / "check" / "fix"
CHECK = Path(__file__).parent / "data" / "check"


def mgtutor(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = no_gpu_env() | {"CUDA_VISIBLE_DEVICES": ""}  # no GPU, whatever machine runs the test
    return subprocess.run(mgtutor_argv(*args), capture_output=True, text=True, timeout=240, env=env, cwd=cwd)


@pytest.mark.parametrize("script, cuda_line", [
    (FIX / "seed_demo.py", "dist.init_process_group("),
    (FIX / "multigpu_torchrun_shape.py", "torch.cuda.set_device(int(os.environ[\"LOCAL_RANK\"]))"),
    (CHECK / "cuda-required.bad.py", "torch.cuda.set_device(local_rank)"),
], ids=["seed-demo", "multigpu-torchrun", "gloo-but-cuda"])
def test_diagnosis_names_the_line_then_fix_makes_it_run(tmp_path, script, cuda_line):
    target = tmp_path / script.name
    shutil.copy(script, target)
    failed = mgtutor("run", "--nproc", "2", "--", target.name, cwd=tmp_path)
    assert failed.returncode != 0
    out = failed.stdout + failed.stderr
    diagnosis = next(line for line in out.splitlines() if line.startswith("diagnosis: "))
    assert diagnosis.split(":")[1].split()[0] in ("no_cuda_driver", "nccl_without_gpu")
    assert f"Your script asks for CUDA at {target.name}:" in diagnosis
    assert "--backend gloo" not in out.split("diagnosis: ", 1)[1]  # the run already used gloo
    assert f"patch (mgtutor check --fix {target}" in out and "+    if torch.cuda.is_available():" in out
    line = int(diagnosis.split(f"{target.name}:")[1].split()[0])
    assert target.read_text().splitlines()[line - 1].strip().startswith(cuda_line.split("(")[0])

    fixed = mgtutor("check", "--fix", target.name, cwd=tmp_path)
    assert fixed.returncode in (0, 1), fixed.stderr
    second = mgtutor("run", "--nproc", "2", "--", target.name, cwd=tmp_path)
    assert second.returncode == 0, second.stdout[-3000:]
    assert "diagnosis:" not in second.stdout


def test_a_fixed_world_size_no_longer_waits_for_a_third_rank(tmp_path):
    target = tmp_path / "world.py"
    shutil.copy(CHECK / "world-set-by-script.bad.py", target)
    assert mgtutor("check", "--fix", "--unsafe-fixes", target.name, cwd=tmp_path).returncode in (0, 1)
    assert 'os.environ["WORLD_SIZE"]' not in target.read_text()
    run = mgtutor("run", "--nproc", "2", "--", target.name, cwd=tmp_path)
    assert run.returncode == 0, run.stdout[-3000:]
