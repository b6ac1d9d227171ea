"""The GPU paths that one NVIDIA GPU can show: NVML for real (Home, the sampler, the Monitor's meters),
NCCL with one rank (launcher, bench, rendezvous probe, a world-size hang), a real CUDA OOM, the default
trainer, native stacks of a rank waiting on the GPU, and every lesson as a one-GPU machine runs it.
The two-GPU suite (the other files here) stays the check for NCCL between GPUs. On the GPU machine:
`bash tests/gpu/device_check.sh one` (or `pytest -m gpu tests/gpu/test_one_gpu.py -s`).
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from test_hang_cli import REPORT_BY_S, Cli, report_block
from mgtutor.diagnostics.meters import Sampler
from mgtutor.lessons.loader import all_lessons
from mgtutor.lessons.runner import run_step
from mgtutor.training.runs.events.writer import read_events
from mgtutor.training.runs.launch.launcher import LaunchSpec, launch
from mgtutor.training.runs.launch.procs import run_processes
from mgtutor.tui.app import MgTutorApp
from mgtutor.tui.widgets.gpu_meters import GpuMeters
from tests.gpu.gpu_helpers import gpu_env, hung_nccl_demo, machine_summary, train_from_monitor
from tests.helpers import wait_for, wait_for_app

UTIL = re.compile(r"(\d+)%")


@pytest.fixture(scope="session")
def one_gpu():
    from mgtutor.training.runs.nvml import inventory

    inv = inventory()
    if not inv.gpus:
        pytest.skip(f"needs an NVIDIA GPU ({inv.error})")
    return inv


def cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, "-m", "mgtutor.tui", *args], capture_output=True, text=True,
                          timeout=timeout, env=gpu_env())
    print(done.stdout[-3000:], done.stderr[-3000:])
    return done


NCCL_ONE_RANK = """
import os, torch, torch.distributed as dist
torch.cuda.set_device(0)
dist.init_process_group("nccl", device_id=torch.device("cuda", 0))
x = torch.full((1 << 20,), 7.0, device="cuda")
dist.all_reduce(x)
torch.cuda.synchronize()
print(f"rank {dist.get_rank()} of {dist.get_world_size()} on {torch.cuda.get_device_name()} sum {x[0].item():.0f}")
dist.destroy_process_group()
"""

WAITS_ON_THE_GPU = """
import torch
torch.ones(1, device="cuda")
print("waiting on the GPU", flush=True)
while True:
    torch.cuda._sleep(10**10)  # a kernel that spins for seconds
    torch.cuda.synchronize()
"""


def test_cli_run_nccl_with_one_rank(one_gpu, write_script):
    done = cli("run", "--nproc", "1", "--", str(write_script("nccl_one.py", NCCL_ONE_RANK)))
    assert done.returncode == 0
    assert "backend nccl" in done.stderr and "rank 0 of 1" in done.stdout and "sum 7" in done.stdout


async def test_home_shows_the_gpus_from_nvml(one_gpu):
    app = MgTutorApp()
    async with app.run_test(size=(80, 24)) as pilot:
        text = await machine_summary(pilot)
    print(text)
    assert f"{len(one_gpu.gpus)} NVIDIA GPU(s)" in text and "GPU 0" in text


def test_sampler_sees_the_process_on_its_gpu(one_gpu):
    holder = subprocess.Popen([sys.executable, "-c", "import time, torch\nx = torch.ones(64 << 20, device='cuda:0')\n"
                               "torch.cuda.synchronize(); print('ready', flush=True); time.sleep(60)"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "ready"
        sampler = Sampler(min_interval=0.5)
        sampler.sample(pids=[holder.pid])
        time.sleep(0.6)
        gpus, host = sampler.sample(pids=[holder.pid])
        gpu = gpus.gpus[0]
        print("\n", gpu)
        assert gpus.error is None
        assert gpu.memory_total_mib > 10_000 and gpu.memory_used_mib > 256
        assert gpu.power_w is not None and gpu.temperature_c is not None and gpu.sm_clock_mhz
        assert holder.pid in [p.pid for p in gpu.processes], gpu.processes
        assert host.processes[holder.pid].rss_mib > 0
    finally:
        holder.kill()
        holder.wait()


def test_doctor_and_one_rank_nccl_bench_and_probe(one_gpu):
    doctor = cli("doctor", "--json")
    report = json.loads(doctor.stdout)
    assert report["versions"]["nccl"] and report["versions"]["driver"] and report["gpus"]
    assert [c for c in report["checks"] if c["status"] == "fail"] == []
    bench = cli("bench", "allreduce", "--nproc", "1", "-b", "8", "-e", "64M", "-f", "64", "--check", "--json")
    rows = json.loads(bench.stdout)
    assert bench.returncode == 0 and rows["backend"] == "nccl" and rows["world_size"] == 1
    assert rows["graph"] is True and all(r["wrong"] == 0 for r in rows["rows"])
    probe = cli("doctor", "--rendezvous", "--json", "--timeout", "60")
    assert probe.returncode == 0 and json.loads(probe.stdout)["backend"] == "nccl"


def test_default_trainer_graphs_its_step_and_a_real_oom_is_diagnosed(one_gpu):
    done = cli("train", "--model", "resnet18", "--nproc", "1", "--batch-size", "256", "--steps", "60",
               "--log-every", "20", timeout=540)
    assert done.returncode == 0
    assert "cuda graphs: on (auto" in done.stdout
    oom = launch(LaunchSpec(target=["-m", "mgtutor.training.worker.train", "--model", "resnet18", "--steps", "6",
                                    "--inject", "oom", "--inject-rank", "0", "--inject-step", "2"],
                            nproc=1, backend="nccl", label="gpu-oom"))
    oom.wait(timeout=300)
    errors = [e.to_json() for e in read_events(oom.record.events_path) if e.type == "error"]
    assert errors and errors[0]["exception"] == "OutOfMemoryError", errors
    diagnosis = json.loads(cli("diagnose", str(oom.record.path), "--json").stdout)
    first = diagnosis["findings"][0]
    assert first["kind"] == "cuda_oom" and "GPU 0" in first["summary"], first


async def test_meters_show_the_gpu_busy_with_rank_0(one_gpu):
    app = MgTutorApp()
    async with app.run_test(size=(160, 48)) as pilot:
        screen = await train_from_monitor(pilot, nproc=1)
        meters = screen.query_one(GpuMeters)

        def busy_with_rank_0() -> bool:
            row = meters.rows.get("gpu0", "")
            util = UTIL.search(row)
            return bool(util and int(util.group(1)) > 0 and row.rstrip().endswith("r0"))

        await wait_for_app(pilot, busy_with_rank_0, 30, interval=0.5, what="GPU 0 busy with r0")
        print("\nmeter rows:", *meters.rows.values(), sep="\n  ")
        await pilot.press("s")
        await pilot.pause()
        await pilot.press("y")
        await wait_for_app(pilot, lambda: screen.state.done, 60, what="the stop")
        assert screen.state.phase == "stopped" and run_processes(screen.record.run_id) == []


def test_native_stacks_of_a_rank_waiting_on_the_gpu(one_gpu, write_script):
    run = Cli("run", "--nproc", "1", "--", str(write_script("waits.py", WAITS_ON_THE_GPU)), env=gpu_env())
    try:
        wait_for(lambda: run._shows(run.out, "waiting on the GPU"), 120, what="the rank on the GPU")
        run_id = json.loads(cli("runs", "list", "--json").stdout)[0]["id"]
        began = time.monotonic()
        shown = cli("runs", "stacks", run_id, "--native", "--json")
        took = time.monotonic() - began
        run.interrupt()
    finally:
        run.kill()
    print(f"runs stacks --native on a rank in torch.cuda.synchronize: {took:.2f} s")
    assert shown.returncode == 0
    stack = Path(json.loads(shown.stdout)["stacks"]["0"]).read_text()
    print(stack[:3000])
    assert "[native]" in stack and "waits.py:7" in stack and ("libcuda" in stack or "libtorch_cuda" in stack)
    assert not run_processes(run_id)


@pytest.mark.timeout(REPORT_BY_S + 180)
def test_world_size_hang_on_nccl_is_named(one_gpu):
    run, err, waited = hung_nccl_demo(1, "world-size")
    print(f"nccl world-size, 1 rank: hang report {waited:.1f} s after start\n{err[-2000:]}")
    block = report_block(err)
    # NCCL's init_process_group returns at once; the first all_reduce waits while NCCL sets up its communicator
    assert block.startswith("hang report (world_size_mismatch): 1 rank started, it waits for more than 1 in "
                            "all_reduce, where NCCL sets up its communicator (demo_workers.py:")
    assert waited < REPORT_BY_S and not run_processes(run.record().name)
    for index in sorted(run.record().glob("stacks/*-stall/index.json")):
        taken = json.loads(index.read_text())
        print(f"{index.parent.name}: {taken['seconds']} s, native {[p['native'] for p in taken['processes']]}")


@pytest.mark.parametrize("lesson", all_lessons(), ids=lambda lesson: lesson.id)
def test_lesson_on_one_gpu(lesson, one_gpu, monkeypatch):
    """A one-GPU machine: one-rank steps on NCCL, two-rank steps on gloo beside the GPU, steps that need
    two GPUs skipped with the reason. Every check but the timing ones must pass."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")  # on a bigger machine: what one GPU gives
    for step in lesson.steps:
        result = run_step(lesson, step, gpus=1)
        print(f"\nLESSON {lesson.id} / {step.name}: {result.status} {result.reason}")
        print("MEASURED " + json.dumps({"lesson": lesson.id, "step": step.name, **result.measures}))
        for check in result.checks:
            print(f"  {check.mark} {check.says}: {check.detail}")
        if result.status == "skipped":
            assert "needs 2 NVIDIA GPU(s); this machine has 1" in result.reason or "pip install" in result.reason
            continue
        timing = {c.says for c in step.checks if c.params.get("timing")}
        failed = [(c.says, c.detail) for c in result.checks if not c.passed and c.says not in timing]
        assert not failed, f"{result.run_path}: {failed}"
