"""The chain a user walks on a machine without a GPU: the run fails, the diagnosis names the script's
own CUDA line and shows the patch, `check --fix` writes it, the next run gets past device setup.

seed-demo is walked as the user walks it: `check --fix` as a process and the fixed script trained on 2 ranks by
the real torchrun. The other runs start their ranks through the stand-in torchrun (the ranks are the real script
on real torch and gloo: what is checked is the script's and mgtutor's, not torchrun's), and `check --fix` goes
through the CLI's main in process, except where torchrun's own behaviour is the point (local_rank_arg.py)."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import no_gpu_env
from tests.userscript_cli import in_process, mgtutor
from mgtutor.training.runs.net.ports import free_port

pytestmark = pytest.mark.integration  # starts torchrun, the stand-in and their ranks

FIX = Path(__file__).parent / "data" / "check" / "fix"
CHECK = Path(__file__).parent / "data" / "check"


@pytest.mark.parametrize("script, cuda_line, as_the_user", [
    (FIX / "seed_demo.py", "dist.init_process_group(", True),
    (FIX / "multigpu_torchrun_shape.py", "torch.cuda.set_device(int(os.environ[\"LOCAL_RANK\"]))", False),
], ids=["seed-demo", "multigpu-torchrun"])
def test_diagnosis_names_the_line_then_fix_makes_it_run(tmp_path, capsys, standin_torchrun, script, cuda_line,
                                                        as_the_user):
    """The failing run is one rank (every rank fails alike at the same line, and the diagnosis is read from
    it); the fixed run is two, as the user runs it. cuda-required.bad.py's diagnosis (the same CUDA line on a
    gloo run) is told in process in test_failures_cuda_missing.py; its fix runs below."""
    target = tmp_path / script.name
    shutil.copy(script, target)
    failed = mgtutor("run", "--nproc", "1", "--", target.name, cwd=tmp_path)
    assert failed.returncode != 0
    out = failed.stdout + failed.stderr
    diagnosis = next(line for line in out.splitlines() if line.startswith("diagnosis: "))
    assert diagnosis.split(":")[1].split()[0] in ("no_cuda_driver", "nccl_without_gpu")
    assert f"Your script asks for CUDA at {target.name}:" in diagnosis
    assert "--backend gloo" not in out.split("diagnosis: ", 1)[1]  # the run already used gloo
    assert f"patch (mgtutor check --fix {target}" in out and "+    if torch.cuda.is_available():" in out
    line = int(diagnosis.split(f"{target.name}:")[1].split()[0])
    assert target.read_text().splitlines()[line - 1].strip().startswith(cuda_line.split("(")[0])

    if as_the_user:
        fixed = mgtutor("check", "--fix", target.name, cwd=tmp_path)
        assert fixed.returncode in (0, 1), fixed.stderr
    else:
        assert in_process(capsys, "check", "--fix", target.name, cwd=tmp_path)[0] in (0, 1)
    second = mgtutor("run", "--nproc", "2", "--", target.name, cwd=tmp_path, torchrun=as_the_user)
    assert second.returncode == 0, second.stdout[-3000:]
    assert "diagnosis:" not in second.stdout


def test_check_fix_makes_a_gloo_script_that_asks_for_cuda_run(tmp_path, capsys, standin_torchrun):
    """cuda-required.bad.py (gloo, then set_device and .cuda() unconditionally): fixed, it trains on 2 ranks.
    Its failing run's diagnosis is the [multigpu-torchrun] case's path (the script's set_device line on a run
    that used gloo), told for this very script in process: test_failures_cuda_missing.py."""
    target = tmp_path / "cuda-required.bad.py"
    shutil.copy(CHECK / target.name, target)
    assert in_process(capsys, "check", "--fix", target.name, cwd=tmp_path)[0] in (0, 1)
    assert "    if torch.cuda.is_available():" in target.read_text()
    second = mgtutor("run", "--nproc", "2", "--", target.name, cwd=tmp_path)
    assert second.returncode == 0, second.stdout[-3000:]
    assert "diagnosis:" not in second.stdout


def test_a_fixed_world_size_no_longer_waits_for_a_third_rank(tmp_path, capsys, standin_torchrun):
    target = tmp_path / "world.py"
    shutil.copy(CHECK / "world-set-by-script.bad.py", target)
    assert in_process(capsys, "check", "--fix", "--unsafe-fixes", target.name, cwd=tmp_path)[0] in (0, 1)
    assert 'os.environ["WORLD_SIZE"]' not in target.read_text()
    run = mgtutor("run", "--nproc", "2", "--", target.name, cwd=tmp_path)
    assert run.returncode == 0, run.stdout[-3000:]


def rank_lines(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("[rank ")]


def epoch_orders(out: str) -> dict[str, set[str]]:
    orders: dict[str, set[str]] = {}
    for line in rank_lines(out):
        if " order " in line:
            orders.setdefault(line.split()[1], set()).add(line.split(" order ")[1])
    return orders


# (script, ranks, what the original run shows, what the fixed run shows): the misbehaviour seen in the output.
# One rank where what is checked is each rank's own (its epoch orders, its warning); two where it is between ranks.
# local_rank_arg.py's original run is where the suite sees torchrun pass rank 1 no --local_rank, so it is started by
# the real torchrun (the stand-in passes none either, whatever torchrun does; the diagnosis of the same argument in
# test_diagnosis_real_init.py is made on a 1-rank run).
BEHAVIOUR = {
    "epoch_order.py": (1, lambda out: all(len(o) == 1 for o in epoch_orders(out).values()),   # same order each epoch
                       lambda out: all(len(o) == 3 for o in epoch_orders(out).values())),  # three orders
    "log_once.py": (2, lambda out: sum("finished epoch" in line for line in rank_lines(out)) == 4,
                    lambda out: sum("finished epoch" in line for line in rank_lines(out)) == 2),
    "local_rank_arg.py": (2, lambda out: "[rank 1] rank 1 thinks its local rank is 0" in out,
                          lambda out: "[rank 1] rank 1 thinks its local rank is 1" in out),
    "old_amp.py": (1, lambda out: out.count("FutureWarning") == 1, lambda out: "FutureWarning" not in out),
}


@pytest.mark.parametrize("name", BEHAVIOUR)
def test_a_fixed_script_behaves_where_the_original_did_not(tmp_path, capsys, standin_torchrun, name):
    target = tmp_path / name
    shutil.copy(FIX / name, target)
    nproc, before, after = BEHAVIOUR[name]
    original = mgtutor("run", "--nproc", str(nproc), "--", name, cwd=tmp_path, torchrun=name == "local_rank_arg.py")
    assert original.returncode == 0 and before(original.stdout), original.stdout[-2000:]
    assert name != "epoch_order.py" or len(epoch_orders(original.stdout)) == nproc  # every rank said its orders
    assert in_process(capsys, "check", "--fix", name, cwd=tmp_path)[0] in (0, 1)
    fixed = mgtutor("run", "--nproc", str(nproc), "--", name, cwd=tmp_path)
    assert fixed.returncode == 0 and after(fixed.stdout), fixed.stdout[-2000:]
    assert in_process(capsys, "check", "--fix", name, cwd=tmp_path)[1].endswith(
        "nothing to fix automatically\n"
        f"  1 more with --unsafe-fixes: init-no-timeout (line {_init_line(target)})\n")


def _init_line(path: Path) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if "init_process_group" in line)


def test_a_spawn_of_one_process_per_gpu_trains_on_a_cpu_once_fixed(tmp_path, capsys):
    """mp.spawn(nprocs=torch.cuda.device_count()) starts nobody on a CPU and exits 0; fixed, it starts two
    processes (`device_count() or 2`, as `mgtutor run` does on a CPU), the batch is split in two, and both
    train on gloo."""
    target = tmp_path / "spawn_device_count.py"
    shutil.copy(FIX / target.name, target)
    port = str(free_port())
    env = no_gpu_env() | {"CUDA_VISIBLE_DEVICES": "", "SPAWN_PORT": port}

    def run() -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, target.name], capture_output=True, text=True, timeout=240, env=env,
                              cwd=tmp_path)

    before = run()
    assert before.returncode == 0 and "trained" not in before.stdout  # nothing was done, and nothing said so
    assert in_process(capsys, "check", "--fix", target.name, cwd=tmp_path)[0] == 0
    after = run()
    assert after.returncode == 0, after.stderr[-2000:]
    # the two processes share one pipe: a line's text and its newline are two writes, so lines may interleave
    assert sorted(re.findall(r"rank \d of \d+ trained \d+ steps of \d+", after.stdout)) == [
        "rank 0 of 2 trained 3 steps of 16", "rank 1 of 2 trained 3 steps of 16"]
