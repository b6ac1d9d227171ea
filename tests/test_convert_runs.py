"""A one-GPU script of the tutorial series' shape, converted by `mgtutor convert`, under `mgtutor run
--nproc 2` on CPU ranks: the ranks read disjoint halves of the data, and the loss after the same
samples is the one-process run's.

Why the losses agree so closely: without shuffling, DistributedSampler gives rank r the indices r, r+2,
…; step k of two ranks with batch B reads exactly the 2B samples of the one-process run's step k with
batch 2B, and DDP averages the two mean-loss gradients, which is the mean over the 2B. Same weights
(seeded, and DDP broadcasts rank 0's), same samples, same update: only float32 summation order
differs (the all-reduce adds two partial sums), a few ulps per step over 16 steps. A relative 1e-5
is two orders of magnitude above that and far below any real difference (a rank reading the wrong
shard, or gradients not averaged, changes the loss in the second or third digit).
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import mgtutor_argv, no_gpu_env

pytestmark = pytest.mark.integration  # starts processes

SHAPE = Path(__file__).parent / "data" / "check" / "convert" / "single_gpu_shape.py"
LOSS = re.compile(r"loss after (\d+) samples: ([0-9.]+)")
REL_TOL = 1e-5


def cpu_env(**extra: str) -> dict[str, str]:
    return no_gpu_env() | {"CUDA_VISIBLE_DEVICES": ""} | extra


def test_converted_script_shards_the_data_and_matches_one_process(tmp_path):
    converted = tmp_path / "train_ddp.py"
    made = subprocess.run(mgtutor_argv("convert", str(SHAPE), "-o", str(converted)), capture_output=True,
                          text=True, timeout=60, env=cpu_env())
    assert made.returncode == 0, made.stderr
    seen = tmp_path / "seen"
    seen.mkdir()
    run = subprocess.run(mgtutor_argv("run", "--nproc", "2", "--", str(converted), "--batch-size", "16",
                                      "--no-shuffle"), capture_output=True, text=True, timeout=240,
                         env=cpu_env(SEEN_DIR=str(seen)), cwd=tmp_path)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    ddp = LOSS.findall(run.stdout)
    assert len(ddp) == 1 and run.stdout.count("| Steps: 8") == 2  # rank 0 alone prints: 128 samples / 16
    shards = [set(json.loads(p.read_text())) for p in seen.glob("*.json")]
    assert len(shards) == 2 and not shards[0] & shards[1] and shards[0] | shards[1] == set(range(256))

    single = subprocess.run([sys.executable, str(SHAPE), "--device", "cpu", "--batch-size", "32", "--no-shuffle"],
                            capture_output=True, text=True, timeout=120, env=cpu_env(), cwd=tmp_path)
    assert single.returncode == 0, single.stderr
    one = LOSS.findall(single.stdout)
    assert one[0][0] == ddp[0][0] == "512"
    assert abs(float(ddp[0][1]) - float(one[0][1])) <= REL_TOL * float(one[0][1])


def test_shuffled_shards_are_disjoint_too(tmp_path):
    converted = tmp_path / "train_ddp.py"
    subprocess.run(mgtutor_argv("convert", str(SHAPE), "-o", str(converted)), check=True, capture_output=True,
                   timeout=60, env=cpu_env())
    seen = tmp_path / "seen"
    seen.mkdir()
    run = subprocess.run(mgtutor_argv("run", "--nproc", "2", "--", str(converted), "--epochs", "1"),
                         capture_output=True, text=True, timeout=240, env=cpu_env(SEEN_DIR=str(seen)), cwd=tmp_path)
    assert run.returncode == 0, run.stdout[-3000:]
    shards = [json.loads(p.read_text()) for p in seen.glob("*.json")]
    assert len(shards) == 2 and not set(shards[0]) & set(shards[1]) and len(shards[0]) == len(shards[1]) == 128
    assert shards[0] != sorted(shards[0])  # the shuffle moved into the sampler still shuffles


BENCH = Path(__file__).parent / "bench"
SHAPES = Path(__file__).parent / "data" / "check" / "convert"


@pytest.mark.parametrize("name", ["flat_enumerate.py", "accel_kwargs.py", "module_loaders.py", "stepped_rows.py"])
def test_each_shape_trains_on_two_gloo_ranks_each_on_its_half_printing_and_saving_once(tmp_path, name):
    """The shapes of issue 44 (a flat script with enumerate(loader) and DataParallel; a device branch with
    **kwargs loaders and a callback that prints and saves; module-level loaders), converted and run under
    torchrun on two CPU ranks; the probe on PYTHONPATH records what each rank did."""
    sys.path.insert(0, str(BENCH))
    import corpus_runs  # tests/bench/corpus_runs.py: the same launch and verdicts as the corpus benchmark

    converted = tmp_path / name
    made = subprocess.run(mgtutor_argv("convert", str(SHAPES / name), "-o", str(converted)), capture_output=True,
                          text=True, timeout=60, env=cpu_env())
    assert made.returncode in (0, 1), made.stderr
    probe = tmp_path / "probe"
    probe.mkdir()
    job = corpus_runs.launch(converted, corpus_runs.Run([]), probe)
    assert job.returncode == 0, job.stdout[-2000:] + job.stderr[-2000:]
    rank0, rank1 = corpus_runs.ranks(probe)
    assert corpus_runs.shards([rank0, rank1])
    assert rank0["prints"] > 0 and rank1["prints"] == 0
    assert rank0["saves"] and not rank1["saves"]
