"""`mgtutor convert` on one NVIDIA GPU: the converted tutorial-shaped script on NCCL with one rank on
the GPU gives the one-process GPU run's loss, and two ranks on a one-GPU machine (`--backend gloo`)
fall back to the CPU together and still match. Tolerance: see tests/test_convert_runs.py; on the GPU
the cuBLAS kernels of the two runs are the same ones (same batch shapes in the one-rank case), so
only the all-reduce order differs; 1e-4 relative leaves room for TF32/reduction-order noise.
On the GPU machine: `pytest -m gpu tests/gpu/test_convert_gpu.py -s`."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import mgtutor_argv
from tests.gpu.gpu_helpers import gpu_env

SHAPE = Path(__file__).parent.parent / "data" / "check" / "convert" / "single_gpu_shape.py"
LOSS = re.compile(r"loss after (\d+) samples: ([0-9.]+)")
REL_TOL = 1e-4


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    from mgtutor.training.runs.nvml import inventory

    if not inventory().gpus:
        pytest.skip("needs an NVIDIA GPU")
    target = tmp_path_factory.mktemp("convert") / "train_ddp.py"
    subprocess.run(mgtutor_argv("convert", str(SHAPE), "-o", str(target)), check=True, capture_output=True,
                   timeout=60, env=gpu_env())
    return target


def one_process(device: str, batch: int, cwd: Path) -> float:
    proc = subprocess.run([sys.executable, str(SHAPE), "--device", device, "--batch-size", str(batch), "--no-shuffle"],
                          capture_output=True, text=True, timeout=300, env=gpu_env(), cwd=cwd)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return float(LOSS.findall(proc.stdout)[0][1])


def ddp_loss(converted: Path, nproc: int, *args: str) -> tuple[float, str]:
    """Each rank's batch is 32/nproc, so a step reads the one-process run's 32 samples. One GPU is
    visible, whatever the machine has: the case is a one-GPU machine."""
    proc = subprocess.run(mgtutor_argv("run", "--nproc", str(nproc), *args, "--", str(converted), "--no-shuffle",
                                       "--batch-size", str(32 // nproc)), capture_output=True,
                          text=True, timeout=300, env=gpu_env() | {"CUDA_VISIBLE_DEVICES": "0"}, cwd=converted.parent)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    found = LOSS.findall(proc.stdout)
    assert len(found) == 1, proc.stdout[-2000:]  # rank 0 alone prints
    return float(found[0][1]), proc.stdout


def test_one_rank_on_the_gpu_matches_the_one_gpu_script(converted):
    reference = one_process("cuda", 32, converted.parent)
    loss, out = ddp_loss(converted, 1)  # NCCL, cuda:0
    print(f"one GPU: one-process loss {reference:.8f}, converted on 1 NCCL rank {loss:.8f}")
    assert abs(loss - reference) <= REL_TOL * reference


def test_two_ranks_on_a_one_gpu_machine_run_on_the_cpu_and_match(converted):
    reference = one_process("cpu", 32, converted.parent)
    loss, out = ddp_loss(converted, 2, "--backend", "gloo")
    print(f"two gloo ranks: one-process CPU loss {reference:.8f}, converted {loss:.8f}")
    assert abs(loss - reference) <= 1e-5 * reference


@pytest.mark.parametrize("name", ["seed_demo.py", "multigpu_torchrun_shape.py"])
def test_a_fixed_script_keeps_its_gpu_path(converted, tmp_path, name):  # converted: skips without a GPU
    """check --fix adds CPU branches; on a GPU the script must still run on NCCL and its GPU (one rank
    here; the two-GPU suite would need two)."""
    fixtures = Path(__file__).parent.parent / "data" / "check" / "fix"
    target = tmp_path / name
    target.write_text((fixtures / name).read_text())
    fixed = subprocess.run(mgtutor_argv("check", "--fix", str(target)), capture_output=True, text=True, timeout=60,
                           env=gpu_env())
    assert "fixed" in fixed.stdout, fixed.stdout
    run = subprocess.run(mgtutor_argv("run", "--nproc", "1", "--", str(target)), capture_output=True, text=True,
                         timeout=300, env=gpu_env() | {"NCCL_DEBUG": "INFO"}, cwd=tmp_path)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert "NCCL INFO" in run.stdout + run.stderr  # the script's own "nccl if a GPU is there" chose NCCL
