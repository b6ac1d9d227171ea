"""Live warnings and the closing diagnosis of `mgtutor run` / `mgtutor train`, on real torchrun jobs (gloo, CPU)."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from conftest import mgtutor_argv, no_gpu_env

pytestmark = pytest.mark.integration  # starts processes

# Rank 1 stays away from init_process_group until the test has seen the warning that names it (after 60 s it
# gives up and fails the run), so a run that succeeds proves the warning came while rank 0 waited.
LATE_RANK = """import os, sys, time
if os.environ["RANK"] == "1":
    deadline = time.monotonic() + 60
    while not os.path.exists(sys.argv[1]) and time.monotonic() < deadline:
        time.sleep(0.2)
    if not os.path.exists(sys.argv[1]):
        sys.exit(5)  # the warning never came
import torch.distributed as dist
dist.init_process_group("gloo")
dist.barrier()
print("joined", dist.get_rank(), flush=True)
dist.destroy_process_group()
"""
RAISES = "import os, time\nif os.environ['RANK'] == '1':\n    raise RuntimeError('boom on purpose')\ntime.sleep(30)\n"


def test_missing_rank_is_named_while_rank0_waits(write_script, tmp_path: Path) -> None:
    go = tmp_path / "go"
    script = write_script("late.py", LATE_RANK)
    cli = subprocess.Popen(mgtutor_argv("run", "--nproc", "2", "--rendezvous-warn", "2", "--", str(script), str(go)),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=no_gpu_env())
    seen: list[str] = []
    try:
        for line in cli.stderr:
            seen.append(line)
            if "rank 1 not at the rendezvous" in line:
                go.touch()  # now rank 1 may join: the run must still be going
                break
        out, err = cli.communicate(timeout=90)
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.wait()
    text = "".join(seen) + err
    assert go.exists(), text
    warning = next(line for line in text.splitlines() if "rank 1 not at the rendezvous" in line)
    assert warning.startswith("mgtutor: warning (rendezvous_late):") and "rank 0 waits" in warning
    assert text.count("rank 1 not at the rendezvous") == 1  # each alert is printed once
    assert cli.returncode == 0, text
    assert "[rank 0] joined 0" in out and "[rank 1] joined 1" in out
    assert "diagnosis:" not in text  # a healthy run ends without one


def test_failed_run_ends_with_the_diagnosis_and_the_command_for_more(write_script, standin_torchrun) -> None:
    """mgtutor's closing diagnosis from the rank's own traceback (the ranks through the torch-free stand-in;
    torchrun's report of the same failure: test_cli_run.py's failing-rank tests)."""
    done = subprocess.run(mgtutor_argv("run", "--nproc", "2", "--", str(write_script("raises.py", RAISES))),
                          capture_output=True, text=True, env=no_gpu_env(), timeout=120)
    assert done.returncode == 1, done.stderr
    err = done.stderr
    assert "run failed: rank 1 failed first" in err
    block = err[err.index("diagnosis: "):]
    assert block.startswith("diagnosis: child_failed (rank 1):") and "boom on purpose" in block
    assert "\n  fix: " in block and "\n  lesson: 14-when-it-goes-wrong" in block
    run_id = done.stdout.strip().splitlines()[-1].rsplit("/", 1)[-1]
    assert f"mgtutor diagnose {run_id}" in block
    assert "warning (" not in err  # nothing late, silent or slow in a run that fails at once


def test_bad_warning_seconds_are_one_line(write_script) -> None:
    for args in (["run", "--rendezvous-warn", "-1", "--", "x.py"], ["train", "--silent-warn", "nan"]):
        done = subprocess.run(mgtutor_argv(*args), capture_output=True, text=True, env=no_gpu_env(), timeout=60)
        assert done.returncode == 2 and "Traceback" not in done.stderr
        assert "give seconds >= 0" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    helptext = subprocess.run(mgtutor_argv("train", "--help"), capture_output=True, text=True, timeout=60).stdout
    assert "--rendezvous-warn S" in helptext and "--silent-warn S" in helptext


@pytest.mark.slow
def test_train_on_a_node_that_cannot_reach_the_store_ends_with_the_node_diagnosis() -> None:
    done = subprocess.run(mgtutor_argv("train", "--nnodes", "2", "--node-rank", "1", "--nproc", "1", "--steps", "2",
                                       "--rdzv-endpoint", "127.0.0.1:1", "--rdzv-timeout", "3"),
                          capture_output=True, text=True, env=no_gpu_env(), timeout=180)
    assert done.returncode != 0
    assert "mgtutor: diagnosis (rendezvous_unreachable): node 1 could not reach the rendezvous store at " \
           "127.0.0.1:1" in done.stderr, done.stderr[-2000:]
    assert done.stderr.count("rendezvous_unreachable") == 1  # the classifier does not repeat the node's finding
