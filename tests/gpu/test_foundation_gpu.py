"""The launcher, the CLI and the Home screen on real GPUs: NCCL across 2 GPUs, NVML for real."""
from __future__ import annotations

import subprocess
import sys

from mgtutor.training.runs.follow.session import RunSession
from mgtutor.training.runs.launch.launcher import LaunchSpec, launch
from mgtutor.tui.app import MgTutorApp
from tests.gpu.gpu_helpers import machine_summary

NCCL_ALLREDUCE = """
import os, torch, torch.distributed as dist
local_rank = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local_rank)
dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank))
x = torch.full((1 << 20,), float(dist.get_rank() + 1), device="cuda")
dist.all_reduce(x)
torch.cuda.synchronize()
print(f"rank {dist.get_rank()} on {torch.cuda.get_device_name()} cuda:{local_rank} sum {x[0].item():.0f} "
      f"nccl {'.'.join(map(str, torch.cuda.nccl.version()))}")
dist.destroy_process_group()
"""


def test_launcher_runs_nccl_on_both_gpus(two_gpus, write_script):
    run = launch(LaunchSpec(target=[str(write_script("nccl_ar.py", NCCL_ALLREDUCE))], label="nccl-ar"))
    lines = [(rank, line) for update in RunSession(run.record, run).updates()
             for rank, stream, line in update.lines if stream == "stdout"]
    result = run.wait().to_json()
    print("\n".join(f"[rank {r}] {line}" for r, line in lines))
    assert result["status"] == "finished", result
    assert result["backend"] == "nccl" and result["world_size"] == 2
    assert len(run.record.meta().devices) == 2
    assert {(r, "sum 3" in line) for r, line in lines} == {(0, True), (1, True)}
    assert any("cuda:1" in line for r, line in lines if r == 1)


def test_cli_run_nccl(two_gpus, write_script):
    proc = subprocess.run([sys.executable, "-m", "mgtutor.tui", "run", "--nproc", "2", "--",
                           str(write_script("nccl_ar.py", NCCL_ALLREDUCE))], capture_output=True, text=True, timeout=300)
    print(proc.stdout, proc.stderr)
    assert proc.returncode == 0
    assert "backend nccl" in proc.stderr and proc.stdout.splitlines()[-1].startswith("run record: ")


async def test_home_shows_both_gpus_from_nvml(two_gpus):
    app = MgTutorApp()
    async with app.run_test(size=(80, 24)) as pilot:
        text = await machine_summary(pilot)
    print(text)
    assert "2 NVIDIA GPU(s)" in text and "GPU 1" in text
