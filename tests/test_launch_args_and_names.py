"""What torchrun must not get wrong for a user's script, on the real torchrun (issue 46, item 15):
arguments that look like torchrun's own options or hold dollar signs reach the script as given, and a machine
whose name does not resolve is named when the run starts and still runs (the ranks meet at 127.0.0.1)."""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import mgtutor_argv, no_gpu_env

pytestmark = pytest.mark.integration

ARGV_SCRIPT = """import json, sys
print("ARGV " + json.dumps(sys.argv[1:]))
"""
DDP_SCRIPT = """import torch, torch.distributed as dist
dist.init_process_group("gloo")
total = torch.ones(1)
dist.all_reduce(total)
print(f"sum {total.item():g}")
dist.destroy_process_group()
"""
# each is a prefix of a torchrun option (--log-dir, --max-restarts, --no-python, --node-rank, --nproc-per-node),
# or torchrun's own option and separator spelled out
LOOKALIKES = ["--log", "--max", "--no", "--node", "--nproc=4", "--", "--rdzv-endpoint", "nowhere:1", "-m", "x"]
# torchrun fills in ${local_rank} with string.Template, which would turn $$ into $
DOLLARS = ["a$$b", "$HOME", "${local_rank}", "100$"]


def test_script_arguments_that_look_like_torchrun_options_or_hold_dollar_signs_reach_the_script(tmp_path: Path) -> None:
    (tmp_path / "argv.py").write_text(ARGV_SCRIPT)
    done = subprocess.run(mgtutor_argv("run", "--nproc", "1", "--", "argv.py", *DOLLARS, *LOOKALIKES), cwd=tmp_path,
                          env=no_gpu_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("[rank 0] ARGV ")]
    assert json.loads(line.removeprefix("[rank 0] ARGV ")) == DOLLARS + LOOKALIKES


def test_a_machine_name_that_does_not_resolve_is_named_at_the_start_and_the_ranks_still_meet(tmp_path: Path) -> None:
    if shutil.which("unshare") is None:
        pytest.skip("no unshare(1) to give the run a host name of its own")
    (tmp_path / "ddp.py").write_text(DDP_SCRIPT)
    name = "no-such-host-46"
    inner = 'hostname "$0" && exec "$@"'
    argv = ["unshare", "-u", "sh", "-c", inner, name, *mgtutor_argv("run", "--nproc", "2", "--", "ddp.py")]
    if subprocess.run(["unshare", "-u", "true"], capture_output=True).returncode != 0:
        pytest.skip("cannot make a UTS namespace here (needs root)")
    done = subprocess.run(argv, cwd=tmp_path, env=no_gpu_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    first = next(line for line in done.stdout.splitlines() if line.startswith("[torchrun]"))
    assert f"this machine's name {name} does not resolve" in first and "/etc/hosts" in first
    assert done.stdout.count("sum 2") == 2  # both ranks met and all-reduced
