"""`mgtutor slurm`: the sbatch script's content, its shell syntax (bash -n), and --submit without Slurm."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from string import Template

import pytest

from conftest import mgtutor_argv
from mgtutor.diagnostics.cluster.slurm import SlurmError, SlurmJob, sbatch_script

needs_bash = pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")


def cli(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(mgtutor_argv("slurm", *args), capture_output=True, text=True, cwd=cwd, env=env, timeout=60)


def directives(text: str) -> dict[str, str]:
    return dict(re.findall(r"^#SBATCH --([\w-]+)=(.*)$", text, re.M))


def test_script_asks_for_the_nodes_and_runs_one_torchrun_per_node() -> None:
    text = sbatch_script(SlurmJob(target=["train.py", "--epochs", "3"], nodes=4, gpus_per_node=8,
                                  partition="gpu", time="02:00:00"))
    assert directives(text) == {"job-name": "mgtutor", "nodes": "4", "ntasks-per-node": "1", "gpus-per-node": "8",
                                "partition": "gpu", "time": "02:00:00", "output": "mgtutor-%j.out"}
    assert 'head_node=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | sed -n 1p)' in text
    assert "| head" not in text  # under pipefail, head's early exit can kill the script with SIGPIPE (141)
    command = text[text.index("srun "):]
    assert "-m torch.distributed.run" in command and "--nproc-per-node 8" in command
    assert '--nnodes "$SLURM_JOB_NUM_NODES"' in command and "--rdzv-backend c10d" in command
    assert '--rdzv-endpoint "${head_node}:${rdzv_port}"' in command and '--rdzv-id "$SLURM_JOB_ID"' in command
    assert command.rstrip().endswith("train.py --epochs 3")
    assert "NCCL_SOCKET_IFNAME" not in text and "GLOO_SOCKET_IFNAME" not in text  # only where given


def test_every_command_and_directive_has_its_explanation_above_it() -> None:
    text = sbatch_script(SlurmJob(target=["t.py"], nccl_ifname="ib0", gloo_ifname="eth0", cpus_per_node=16))
    lines = text.splitlines()
    for i, line in enumerate(lines[1:], start=1):
        is_content = line.startswith("#SBATCH") or (line and not line.startswith("#"))
        if is_content and not lines[i - 1].endswith("\\"):  # a continuation belongs to the line above
            assert lines[i - 1].startswith("# "), f"line {i + 1} has no comment above it: {line}"
    assert "export NCCL_SOCKET_IFNAME=ib0" in text and "export GLOO_SOCKET_IFNAME=eth0" in text


@pytest.mark.integration
@needs_bash
@pytest.mark.parametrize("target", [["train.py", "--name", "it's a \"test\" $HOME $$ ${local_rank}"],
                                    ["-m", "pkg.train", "--lr", "0.1"]])
def test_script_passes_bash_n_and_quotes_arguments(tmp_path: Path, target: list[str]) -> None:
    path = tmp_path / "job.sbatch"
    path.write_text(sbatch_script(SlurmJob(target=target, nodes=2, gpus_per_node=2, cpus_per_node=8,
                                           extra_env={"NCCL_DEBUG": "INFO"}, gloo_ifname="^docker,lo")))
    checked = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr
    # the last line, as bash splits it and torchrun substitutes ${local_rank} in it, gives back exactly the target
    last = path.read_text().rstrip().splitlines()[-1]
    words = subprocess.run(["bash", "-c", f'printf "%s\\n" {last}'], capture_output=True, text=True, env={})
    assert [Template(word).safe_substitute(local_rank="0") for word in words.stdout.splitlines()] == target


@pytest.mark.parametrize("job, message", [
    (SlurmJob(target=[]), "nothing to run"),
    (SlurmJob(target=["t.py"], nodes=0), "--nodes must be at least 1"),
    (SlurmJob(target=["t.py"], gpus_per_node=0), "--gpus-per-node"),
    (SlurmJob(target=["t.py"], time="2 hours"), "not a Slurm time"),
    (SlurmJob(target=["t.py"], port=80), "--port"),
    (SlurmJob(target=["t.py"], nccl_ifname="eth0; rm -rf /"), "not an interface list"),
    # a newline (even a trailing one) or a # in a directive's value would write a directive of its own
    (SlurmJob(target=["t.py"], partition="gpu\n#SBATCH --wrap=evil"), "--partition 'gpu\\n#SBATCH --wrap=evil'"),
    (SlurmJob(target=["t.py"], partition="gpu#x"), "--partition 'gpu#x': use letters, digits"),
    (SlurmJob(target=["t.py"], job_name="mgtutor\n"), "--job-name 'mgtutor\\n'"),
    (SlurmJob(target=["t.py"], time="30\n"), "--time '30\\n' is not a Slurm time"),
    (SlurmJob(target=["t.py"], gloo_ifname="eth0\n"), "not an interface list"),
])
def test_bad_input_is_refused_with_the_fix(job: SlurmJob, message: str) -> None:
    with pytest.raises(SlurmError, match=re.escape(message)):
        sbatch_script(job)


def test_several_partitions_are_one_directive() -> None:
    assert directives(sbatch_script(SlurmJob(target=["t.py"], partition="gpu,gpu-long")))["partition"] == "gpu,gpu-long"


@pytest.mark.integration
def test_cli_refuses_a_newline_or_hash_in_a_directive_value(tmp_path: Path) -> None:
    for flag, value in (("--partition", "gpu\n#SBATCH --wrap=evil"), ("--partition", "gpu#1"),
                        ("--job-name", "x\n#SBATCH --wrap=evil"), ("--time", "30\n")):
        out = tmp_path / "job.sbatch"
        done = cli("--nodes", "2", flag, value, "-o", str(out), "--", "train.py")
        assert done.returncode == 2, (flag, value, done.stdout)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"mgtutor slurm: error: {flag} "), done.stderr
        assert not out.exists() and "#SBATCH" not in done.stdout


@pytest.mark.integration
def test_cli_writes_the_file_and_refuses_bad_input(tmp_path: Path) -> None:
    done = cli("--nodes", "2", "--gpus-per-node", "4", "-o", str(tmp_path / "job.sbatch"), "--", "train.py")
    assert done.returncode == 0, done.stderr
    assert directives((tmp_path / "job.sbatch").read_text())["gpus-per-node"] == "4"
    assert os.access(tmp_path / "job.sbatch", os.X_OK)
    bad = cli("--nodes", "2", "--time", "soon", "--", "train.py")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert bad.stderr.strip().splitlines() == ["mgtutor slurm: error: --time 'soon' is not a Slurm time: use MM, HH:MM:SS or D-HH:MM:SS"]


@pytest.mark.integration
def test_submit_without_sbatch_says_so_and_keeps_the_script(tmp_path: Path) -> None:
    env = dict(os.environ, PATH=str(tmp_path / "empty-bin"))  # no sbatch anywhere on PATH
    done = cli("--nodes", "2", "--submit", "--", "train.py", cwd=tmp_path, env=env)
    assert done.returncode == 1
    assert "sbatch not found" in done.stderr and "mgtutor.sbatch" in done.stderr
    assert (tmp_path / "mgtutor.sbatch").is_file()
