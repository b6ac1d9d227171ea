"""The `if` that skipped init_process_group, worked out from what the launch fixed (the run's record, the
rank's traceback, the script read statically): the environment torchrun set, the script's arguments, a
name assigned from them; and what is said when the script never calls init at all."""
from __future__ import annotations

from pathlib import Path

from mgtutor.diagnostics.failures.classify import diagnose_run
from mgtutor.training.runs.records.record import RunRecord
from mgtutor.training.runs.records.types import RunMeta

TRACEBACK = """Traceback (most recent call last):
  File "{script}", line {line}, in <module>
    {code}
  File "/usr/lib/python3/site-packages/torch/distributed/distributed_c10d.py", line 1981, in _get_default_group
    raise ValueError(
ValueError: Default process group has not been initialized, please make sure to call init_process_group.
"""


def failed_run(tmp_path: Path, source: str, failing: str, world_size: int = 2, args: tuple[str, ...] = ()):
    script = tmp_path / "train.py"
    script.write_text(source)
    record = RunRecord.create("train-py", root=tmp_path / "runs")
    record.write_meta(RunMeta.from_json({"target": ["train.py", *args], "cwd": str(tmp_path), "backend": "gloo",
                                         "world_size": world_size, "nproc_per_node": world_size}))
    line = next(n for n, text in enumerate(source.splitlines(), 1) if failing in text)
    (record.path / "logs" / "rank0.stderr.log").write_text(TRACEBACK.format(script=script, line=line, code=failing))
    return next(f for f in diagnose_run(record) if f.kind == "process_group_not_initialized")


ENV_GUARD = """import os
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

distributed = "WORLD_SIZE" in os.environ and int(os.environ["WORLD_SIZE"]) > 1
if distributed:
    dist.init_process_group("gloo")
model = DDP(object())
"""


def test_a_world_size_of_one_is_named_as_why_the_environment_test_failed(tmp_path):
    finding = failed_run(tmp_path, ENV_GUARD, "model = DDP(object())", world_size=1)
    assert "skipped init_process_group (train.py:7): it runs only when `distributed` (train.py:6) is true" \
        in finding.summary
    assert "WORLD_SIZE is '1' in every rank's environment" in finding.summary
    assert "Launch with torchrun" not in finding.fix and 'if "RANK" in os.environ:' in finding.fix


def test_a_flag_passed_in_the_else_branch_is_read_from_the_runs_arguments(tmp_path):
    source = """import argparse
import torch.distributed as dist
parser = argparse.ArgumentParser()
parser.add_argument("--single", action="store_true")
args = parser.parse_args()
if args.single:
    print("one process")
else:
    dist.init_process_group("gloo")
dist.barrier()
"""
    finding = failed_run(tmp_path, source, "dist.barrier()", args=("--single",))
    assert "it runs only when `args.single` (train.py:6) is false" in finding.summary
    assert "--single was passed" in finding.summary


def test_a_script_that_never_calls_init_is_told_so_not_to_launch_with_torchrun(tmp_path):
    source = "import torch.distributed as dist\nprint(dist.get_rank())\n"
    finding = failed_run(tmp_path, source, "print(dist.get_rank())")
    assert "train.py itself never calls init_process_group" in finding.summary
    assert finding.fix.startswith("Call `dist.init_process_group()` once, before train.py:2 (`print(dist.get_rank())`)")


def test_a_condition_the_launch_does_not_fix_still_names_the_branch_without_guessing_why(tmp_path):
    source = """import os
import torch.distributed as dist
if os.environ.get("MY_CLUSTER") == "yes":
    dist.init_process_group("gloo")
dist.barrier()
"""
    finding = failed_run(tmp_path, source, "dist.barrier()")
    assert "it runs only when `os.environ.get(\"MY_CLUSTER\") == \"yes\"` (train.py:3) is true, and under this " \
           "launch it was not. Then" in finding.summary
