"""`mgtutor train` and `mgtutor bench scaling` as a user runs them (real subprocesses, gloo ranks),
plus the torch-free pieces they are built from."""
from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path

import pytest
from conftest import mgtutor_argv, no_gpu_env
from mgtutor.training.runs.events.writer import encode
from mgtutor.training.runs.events.writer import EventReader, read_events
from mgtutor.training.runs.follow.summary import summarize
from mgtutor.training.runs.launch.train_options import add_train_options, worker_argv
from mgtutor.diagnostics.bench.scaling import Point, rate_points
from tests.trainer_runs import SCALING_GROUP, ScalingRun
from tests.trainer_runs import scaling_run  # noqa: F401 - a fixture: the shared run

SMALL = ["--backend", "gloo", "--batch-size", "8", "--log-every", "1"]


def cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(mgtutor_argv(*args), capture_output=True, text=True, timeout=timeout, env=no_gpu_env())


@pytest.mark.integration
def test_train_on_real_cifar_format_data_without_sampler_accumulating_gradients(tmp_path: Path) -> None:
    """The real input pipeline (pickle → PIL → transforms → DataLoader workers) on 2 ranks; without
    DistributedSampler both ranks train on the very same samples. Each step accumulates two micro-batches:
    no_sync on a static_graph DDP trips the reducer's assert, so accumulation must train without it (the
    default static graph is turned off for it)."""
    from tests.bench.make_fake_cifar import write_fake_cifar  # in process, not a Python of its own

    write_fake_cifar(tmp_path / "cifar", per_batch=64, batches=2)
    proc = cli("train", *SMALL, "--data", "cifar10", "--data-dir", str(tmp_path / "cifar"), "--workers", "1",
               "--steps", "3", "--grad-accum", "2", "--inject", "no-sampler", "--record-indices")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert lines[-1].startswith("run record: ")
    record = Path(lines[-1].removeprefix("run record: "))
    table = [line.split() for line in lines if line.split()[:1] in (["0"], ["1"], ["all"])]
    assert [row[0] for row in table] == ["0", "1", "all"] and table[0][-1] == "ok"
    assert "[rank 0] step      3/3" in proc.stdout
    assert sorted(e.step for e in read_events(record / "events.jsonl") if e.type == "step" and e.rank == 0) == [1, 2, 3]
    seen = [json.loads((record / f"indices.rank{r}.json").read_text()) for r in (0, 1)]
    assert seen[0] == seen[1] and len(seen[0]) == 3 * 2 * 8 and max(seen[0]) < 128


BAD_INPUT = (["--data", "cifar10"], ["--data", "imagefolder", "--data-dir", "nope"],
             ["--strategy", "single", "--nproc", "2"], ["--resume"], ["--bucket-mb", "0"],
             ["--cuda-graphs", "--amp", "fp16"], ["--cuda-graphs", "--grad-accum", "2"], ["--cuda-graphs"],
             ["--cuda-graphs", "--inject", "unused-param", "--backend", "nccl"])


@pytest.mark.integration
def test_train_bad_input_is_one_line_and_exit_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """The first as a user runs it (a process of its own: no traceback on its stderr); every case through
    the CLI's own main in process, which is what the process runs (one process each cost a second of CPU)."""
    first = cli("train", "--backend", "gloo", *BAD_INPUT[0], timeout=60)
    assert first.returncode == 2, first.stderr
    assert first.stderr.startswith("mgtutor train: error: ") and first.stderr.count("\n") == 1, first.stderr
    assert "Traceback" not in first.stderr
    from mgtutor.tui.cli import main

    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")  # as no_gpu_env() gives the process
    for args in BAD_INPUT:
        args = [str(tmp_path / arg) if arg == "nope" else arg for arg in args]
        assert main(["train", "--backend", "gloo", *args]) == 2, args
        err = capsys.readouterr().err
        assert err.startswith("mgtutor train: error: ") and err.count("\n") == 1, err
        assert "Traceback" not in err


@pytest.mark.integration
@SCALING_GROUP
def test_bench_scaling_json_measures_one_and_two_ranks(scaling_run: ScalingRun) -> None:
    """`mgtutor bench scaling --backend gloo --max-gpus 2 --json` (the run test_train.py's resume check reads too)."""
    report = scaling_run.report
    assert report["model"] == "tinycnn"
    points = report["points"]
    assert [(p["world_size"], p["strategy"]) for p in points] == [(1, "single"), (2, "ddp")]
    base = points[0]["samples_per_s"]
    assert base > 0 and points[0]["efficiency"] == 1.0
    assert abs(points[1]["efficiency"] - points[1]["samples_per_s"] / (2 * base)) < 1e-3
    assert all(Path(p["run_record"], "events.jsonl").is_file() for p in points)
    assert "share this machine's" in report["note"]  # 2 CPU ranks on gloo add no cores
    assert [p["compile"] for p in points] == ["off", "off"]  # the trainer's --compile auto: CPU ranks stay eager


def test_bench_scaling_on_one_device_says_there_is_nothing_to_scale_to(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The command's own output for --max-gpus 1, in process: the one measured point stands in for the run
    (1 device without DDP, the first point test_bench_scaling_json_measures_one_and_two_ranks measures for real)."""
    from mgtutor.tui.cli import main
    from mgtutor.tui.commands.bench import scaling as command

    asked: list[tuple[int, str]] = []

    def one_point(train_argv: list[str], max_devices: int, backend: str, on_line=None, on_point=None) -> list[Point]:
        asked.append((max_devices, backend))
        point = Point(1, "single", 1234.0, 0.01, 0.001, 0.009, "/runs/x")
        if on_point:
            on_point(point)
        return rate_points([point], point.samples_per_s)

    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")
    monkeypatch.setattr(command, "scaling_report", one_point)
    assert main(["bench", "scaling", *SMALL, "--steps", "3", "--dataset-size", "128", "--max-gpus", "1"]) == 0
    out = capsys.readouterr().out
    assert asked == [(1, "gloo")]  # one device: the baseline alone is measured
    assert "1 device without DDP, and nothing to scale to: one device" in out.splitlines()[0]
    assert "2…1" not in out


def test_efficiency_is_against_one_device_without_ddp() -> None:
    points = rate_points([Point(1, "single", 1000.0, None, None, None, "a"),
                          Point(2, "ddp", 1900.0, None, None, None, "b"),
                          Point(4, "ddp", 3000.0, None, None, None, "c")], baseline=1000.0)
    assert [p.efficiency for p in points] == [1.0, 0.95, 0.75]
    assert [p.speedup for p in points] == [1.0, 1.9, 3.0]


def test_worker_argv_passes_only_what_was_changed() -> None:
    parser = argparse.ArgumentParser()
    add_train_options(parser)
    args = parser.parse_args(["--model", "resnet18", "--steps", "5", "--record-indices", "--lr", "0.05"])
    argv = worker_argv(args, data_dir="/data")
    assert argv == ["--model", "resnet18", "--data-dir", "/data", "--steps", "5", "--record-indices"]
    assert parser.parse_args(argv).model == "resnet18"


def test_follower_and_summary_read_whole_events_only(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    step = encode("step", 0, step=1, loss=2.0, samples_per_s=10.0)
    path.write_bytes(step + encode("step", 1, step=1, loss=2.1)[:10])
    follower = EventReader(path)
    assert [e.type for e in follower.poll()] == ["step"]
    with path.open("ab") as handle:
        handle.write(encode("step", 1, step=1, loss=2.1)[10:])
        handle.write(encode("result", 0, steps=1, samples_per_s=10.0, final_loss=1.5, mem_peak_mib=3.0))
        handle.write(encode("error", 1, error="RuntimeError: boom"))
    assert [(e.rank, e.type) for e in follower.poll()] == [(1, "step"), (0, "result"), (1, "error")]
    summary = summarize(read_events(path), 2)
    assert not summary.complete and summary.samples_per_s is None
    assert summary.ranks[0].loss == 1.5 and summary.ranks[1].error == "RuntimeError: boom"


def test_the_inject_help_lists_every_mode() -> None:
    """The help writes the modes out (one message for the catalogue); it must name each one, in order."""
    import argparse

    from mgtutor.training.runs.launch.train_options import INJECT_MODES, add_train_options

    parser = argparse.ArgumentParser()
    add_train_options(parser)
    action = next(a for a in parser._actions if "--inject" in a.option_strings)
    assert action.help.split(": ", 1)[1].split(", ") == list(INJECT_MODES)
