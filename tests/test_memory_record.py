"""`mgtutor run --memory`: the rank wrapper runs the script under the allocator recorder (on CPU ranks it
says there is nothing to record and the script runs as it would), and the summary of a snapshot sorts
allocated blocks by kind and by the user's own lines. The real OOM is in tests/gpu/test_maxbatch_gpu.py."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from conftest import mgtutor_argv, no_gpu_env

from mgtutor.training.worker.trainer.memory_record import summarise, user_frame

TORCH_FILE = __import__("torch").__file__


def block(address: int, size: int, frames: list[dict]) -> dict:
    return {"address": address, "size": size, "state": "active_allocated", "frames": frames}


def test_blocks_are_sorted_by_kind_and_by_the_users_line() -> None:
    mine = {"filename": "/home/user/train.py", "line": 41, "name": "<module>"}
    inside = {"filename": TORCH_FILE, "line": 1, "name": "forward"}
    snapshot = {"segments": [{"device": 0, "blocks": [
        block(0, 1000, [inside, mine]),          # holds a parameter
        block(1000, 500, [mine]),                # holds its gradient
        block(2000, 4000, [inside, mine]),       # an activation made at train.py:41
        block(8000, 300, []),                    # no stack: allocated before the history started
        {"address": 9000, "size": 700, "state": "inactive", "frames": []},
    ]}, {"device": 1, "blocks": [block(0, 99, [mine])]}]}
    spans = [(0, 1000, "parameters"), (1000, 1500, "gradients")]
    summary = summarise(snapshot, 0, spans)
    assert summary["by_kind"] == {"parameters": 1000, "gradients": 500, "activations": 4000, "other": 300}
    assert summary["total_bytes"] == 5800  # the inactive block and the other GPU's are left out
    assert summary["top_lines"] == [{"file": "/home/user/train.py", "line": 41, "function": "<module>", "bytes": 5500}]
    assert user_frame([inside]) is None


@pytest.mark.integration
def test_run_memory_on_cpu_ranks_runs_the_script_as_it_is(tmp_path: Path, standin_torchrun) -> None:
    """Through the stand-in torchrun (the `standin_torchrun` fixture sets MGTUTOR_LAUNCHER, which the
    CLI process inherits), on one rank (what the wrapper does is each rank's own): the rank wrapper and the
    recorder are mgtutor's, the script is torch-free."""
    script = tmp_path / "train.py"
    script.write_text("import sys, os\nprint('args', sys.argv[1:], os.environ['RANK'], __name__)\nsys.exit(3)\n")
    proc = subprocess.run(mgtutor_argv("run", "--memory", "--nproc", "1", "--backend", "gloo", "--", str(script),
                                       "--lr", "0.1"), capture_output=True, text=True, timeout=180, env=no_gpu_env())
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "[rank 0] args ['--lr', '0.1'] 0 __main__" in proc.stdout
    assert "[rank 0] mgtutor --memory: no CUDA device in this rank: nothing to record" in proc.stdout + proc.stderr
