"""The trainer's shared real run: one `mgtutor bench scaling --max-gpus 2 --json` of the tiny CNN, made once
per test worker (`scaling_run`), with XDG homes of its own.

Its two points are the trainer under the real torchrun (test_train.py's own runs go through the stand-in):
1 rank without DDP, then 2 DDP ranks. test_train_cli.py checks the report; the 2-rank point, RESUMED_STEPS
uninterrupted steps with test_train.py's TRAIN_ARGS, is the curve test_train.py's resumed run must continue.
The tests that read it carry `SCALING_GROUP` (xdist group `train_full_run`, with test_train.py's own full run),
so one worker makes it."""
from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from mgtutor.training.runs.launch.launcher import LAUNCHER_ENV
from tests.conftest import homes_under, mgtutor_argv

SCALING_GROUP = pytest.mark.xdist_group("train_full_run")
# What test_train.py's runs train (the scaling run passes the same to its points, on gloo)
TRAIN_ARGS = ["--model", "tinycnn", "--batch-size", "16", "--dataset-size", "512", "--log-every", "1", "--seed", "7"]
RESUMED_STEPS = 16  # the full run's 12 steps and 4 more: one epoch of 512 samples on 2 ranks

MADE: dict[str, Any] = {}  # this worker's run, whichever module's fixture made it


@dataclass(frozen=True)
class ScalingRun:
    proc: subprocess.CompletedProcess[str]
    report: dict[str, Any]  # what --json printed


@pytest.fixture(scope="session")
def scaling_run(tmp_path_factory: pytest.TempPathFactory) -> ScalingRun:
    if "scaling" not in MADE:
        home = tmp_path_factory.mktemp("scaling")
        env = {**os.environ, "LANGUAGE": "en", "MGTUTOR_NO_NVML": "1", **homes_under(home)}
        env.pop(LAUNCHER_ENV, None)  # the real torchrun, whichever test asks first
        proc = subprocess.run(mgtutor_argv("bench", "scaling", "--backend", "gloo", *TRAIN_ARGS,
                                           "--steps", str(RESUMED_STEPS), "--max-gpus", "2", "--json"),
                              capture_output=True, text=True, timeout=300, env=env, stdin=subprocess.DEVNULL)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        MADE["scaling"] = ScalingRun(proc, json.loads(proc.stdout))
    return MADE["scaling"]


def point_record(run: ScalingRun, world_size: int) -> Path:
    return Path(next(p["run_record"] for p in run.report["points"] if p["world_size"] == world_size))
