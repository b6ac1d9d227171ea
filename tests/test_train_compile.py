"""`--compile auto` (the default): what it decides and why, inductor's cache folder, and a compile that
fails falling back to the eager step with its reason (a failing backend at the compile boundary, in a
real one-process run on the CPU). The GPU side, real inductor, runs in tests/gpu/test_one_gpu.py."""
from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mgtutor.training.runs.launch.train_options import add_train_options, check_train_options, worker_argv
from mgtutor.training.worker.trainer import compiling
from mgtutor.training.worker.trainer.compile_choice import cache_root, compile_choice, use_mgtutor_cache


def parsed(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_train_options(parser)
    return parser.parse_args(list(argv))


BIG = ("--model", "resnet50", "--image-size", "224", "--batch-size", "128")


def test_auto_compiles_a_long_gpu_run_at_large_images_inside_the_graph() -> None:
    plan = compile_choice(parsed(*BIG), on_gpu=True, graphs=True, total_steps=500)
    assert (plan.mode, plan.in_graph) == ("default", True)
    assert plan.why.startswith("inductor inside the whole-step CUDA graph (auto: GPU, resnet50 at 224², 500 steps")
    assert plan.label == "default inside the whole-step CUDA graph"
    # a step that cannot be graphed (a warm-up changes the learning rate) is compiled alone
    alone = compile_choice(parsed(*BIG, "--warmup", "5"), on_gpu=True, graphs=False, total_steps=500)
    assert (alone.mode, alone.in_graph) == ("default", False) and alone.why.startswith("inductor (auto:")


@pytest.mark.parametrize("argv, on_gpu, graphs, steps, reason", [
    (BIG, False, False, 5000, "the ranks run on the CPU"),
    (BIG, True, True, 299, "a run of 299 steps (< 300)"),
    ((*BIG, "--inject", "oom"), True, False, 5000, "--inject oom"),
    ((*BIG, "--strategy", "dp"), True, False, 5000, "--strategy dp"),
    (("--image-size", "224"), True, True, 5000, "tinycnn trains in seconds"),
    (("--model", "resnet18", "--image-size", "32"), True, True, 19_999, "only after about 20,000 steps, not 19,999"),
    (("--model", "resnet18", "--image-size", "32", "--warmup", "3"), True, False, 500, "bound by kernel launches"),
], ids=["CPU", "short", "inject", "dp", "tinycnn", "32px graphed", "32px eager"])
def test_auto_stays_eager_and_says_why(argv: tuple[str, ...], on_gpu: bool, graphs: bool, steps: int,
                                       reason: str) -> None:
    plan = compile_choice(parsed(*argv), on_gpu=on_gpu, graphs=graphs, total_steps=steps)
    assert plan.mode is None and plan.label == "off"
    assert plan.why.startswith("off (auto: ") and reason in plan.why, plan.why
    assert ("--compile default to force it" in plan.why) is on_gpu


def test_auto_compiles_small_images_inside_the_graph_for_a_run_long_enough_to_repay_it() -> None:
    from mgtutor.training.worker.trainer.compile_choice import SMALL_IMAGE_STEPS

    argv = ("--model", "resnet18", "--image-size", "32")
    plan = compile_choice(parsed(*argv), on_gpu=True, graphs=True, total_steps=SMALL_IMAGE_STEPS)
    assert (plan.mode, plan.in_graph) == ("default", True), plan.why
    alone = compile_choice(parsed(*argv), on_gpu=True, graphs=False, total_steps=10 * SMALL_IMAGE_STEPS)
    assert alone.mode is None and "bound by kernel launches" in alone.why


def test_an_explicit_mode_wins_over_auto_even_on_a_cpu() -> None:
    assert compile_choice(parsed("--compile", "default"), on_gpu=False, graphs=False, total_steps=3).mode == "default"
    inside = compile_choice(parsed("--compile", "default"), on_gpu=True, graphs=True, total_steps=3)
    assert inside.in_graph and inside.why == "default inside the whole-step CUDA graph (--compile default)"
    assert compile_choice(parsed(*BIG, "--compile", "off"), True, True, 5000).why == "off (--compile off)"
    overhead = compile_choice(parsed("--compile", "reduce-overhead"), on_gpu=True, graphs=False, total_steps=3)
    assert (overhead.mode, overhead.in_graph) == ("reduce-overhead", False)


def test_compile_values_reach_the_worker_and_clash_with_graphs_only_where_they_must() -> None:
    assert parsed().compile == "auto" and worker_argv(parsed()) == []
    assert worker_argv(parsed("--compile", "off")) == ["--compile", "off"]
    assert check_train_options(parsed("--compile", "default", "--cuda-graphs")) is None  # compiled inside the graph
    problem = check_train_options(parsed("--compile", "reduce-overhead", "--cuda-graphs"))
    assert problem and "records CUDA graphs of its own" in problem


def test_inductor_cache_lives_in_mgtutors_cache_folder(xdg_homes: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # setenv first, so that the undo also removes what use_mgtutor_cache() writes (a bare delenv of an
    # unset variable records nothing, and the folder of this test would leak into later runs' children)
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", "set by this test")
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR")
    root = use_mgtutor_cache()
    assert root == xdg_homes / "xdg_cache_home" / "mgtutor" / "inductor" and root.is_dir()
    import os
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(root)
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(xdg_homes / "mine"))
    assert cache_root() == xdg_homes / "mine"  # the user's own choice is kept
    import torchvision  # noqa: F401  (its import makes inductor write its own default into the variable)
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", default_cache_dir())
    assert cache_root() == root  # torch's default is nobody's choice: mgtutor's folder still wins


def failing_backend(gm: Any, example_inputs: Any, **_kwargs: Any) -> Any:
    raise RuntimeError("fake compiler: no C++ compiler found")


def result_event(events: Path) -> dict[str, Any]:
    return next(e for e in map(json.loads, events.read_text().splitlines()) if e["type"] == "result")


CPU_RUN = ["--strategy", "single", "--model", "tinycnn", "--batch-size", "8", "--dataset-size", "64",
           "--steps", "4", "--log-every", "2"]


@pytest.mark.integration
def test_a_failed_compile_falls_back_to_the_eager_step_with_its_reason(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], one_thread) -> None:
    from mgtutor.training.worker import train

    events = tmp_path / "events.jsonl"
    monkeypatch.setenv("MGTUTOR_EVENTS", str(events))
    monkeypatch.setenv("MGTUTOR_BACKEND", "gloo")
    monkeypatch.setattr(compiling, "BACKEND", failing_backend)
    assert train.main([*CPU_RUN, "--compile", "default"]) == 0
    out = capsys.readouterr().out
    assert "compile: default (--compile default)" in out
    line = next(x for x in out.splitlines() if "failed, so the step runs without compiling" in x)
    assert "BackendCompilerFailed" in line and "fake compiler: no C++ compiler found" in line
    result = result_event(events)
    assert result["steps"] == 4 and result["compile"] == "default"
    assert "fake compiler" in result["compile_fallback"] and result["final_loss"] > 0
    assert "done: 4 steps" in out


@pytest.fixture
def one_thread() -> Iterator[None]:
    """The in-process runs compute on one thread: on two busy cores torch's intra-op threads spin against the
    other workers' processes (300 steps of batch 1 took 18 CPU-s on two threads, 0.7 s on one)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_a_cpu_run_with_default_flags_never_compiles(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], one_thread) -> None:
    from mgtutor.training.worker import train

    events = tmp_path / "events.jsonl"
    monkeypatch.setenv("MGTUTOR_EVENTS", str(events))
    monkeypatch.setenv("MGTUTOR_BACKEND", "gloo")
    monkeypatch.setattr(compiling, "BACKEND", failing_backend)  # any compile would show as a fallback
    assert train.main([*CPU_RUN, "--steps", "300", "--batch-size", "1",
                       "--dataset-size", "300", "--log-every", "100"]) == 0
    out = capsys.readouterr().out
    assert "compile: off (auto: the ranks run on the CPU)" in out and "failed" not in out
    result = result_event(events)
    assert result["compile"] == "off" and "compile_s" not in result and result["ready_s"] > 0


def test_lesson_11_tells_the_choice_auto_makes() -> None:
    from mgtutor.lessons.loader import get_lesson
    from mgtutor.training.worker.trainer.compile_choice import MIN_IMAGE_PX, MIN_STEPS, SMALL_IMAGE_STEPS

    text = " ".join(get_lesson("11").explanation().split())
    assert f"a real model at {MIN_IMAGE_PX} px or more and {MIN_STEPS} steps or more" in text
    assert f"below {MIN_IMAGE_PX} px only from {SMALL_IMAGE_STEPS:,} steps" in text
    big = compile_choice(parsed(*BIG), on_gpu=True, graphs=True, total_steps=MIN_STEPS)
    small = compile_choice(parsed("--model", "resnet18"), on_gpu=True, graphs=True, total_steps=5000)
    assert big.in_graph and "runs it inside the whole-step graph" in text
    assert small.mode is None and "keeps the graphed eager step" in text


@pytest.mark.integration
def test_the_second_run_of_a_model_takes_inductors_graphs_from_mgtutors_cache(
        xdg_homes: Path, monkeypatch: pytest.MonkeyPatch, standin_torchrun) -> None:
    """Real inductor (C++ on the CPU) in a real trainer rank, twice: the first run builds, the second reuses.
    The cache is the rank's own, so the stand-in torchrun starts it (the trainer under the real torchrun:
    test_train.py, test_train_cli.py, and the compile crash below)."""
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)  # as a user starts: nobody chose a folder
    # kernels without SIMD: cached and reused alike, and the cold build skips the ISA probes and the vector
    # headers (7 of its 29 CPU-s)
    monkeypatch.setenv("TORCHINDUCTOR_VEC_ISA_OK", "0")
    from mgtutor.training.runs.events.writer import read_events
    from mgtutor.training.runs.launch.launcher import LaunchSpec, launch

    def compiled_run() -> tuple[dict[str, Any], str]:
        run = launch(LaunchSpec(target=["-m", "mgtutor.training.worker.train", *CPU_RUN, "--compile", "default"],
                                nproc=1, backend="gloo", label="test-compile-cache"))
        run.wait(timeout=240)
        result = next(e.to_json() for e in read_events(run.record.events_path) if e.type == "result")
        return result, run.record.rank_log(0, "stdout").read_text()

    cold, cold_log = compiled_run()
    warm, warm_log = compiled_run()
    assert cold["compile_fallback"] is None and cold["compile_cache"]["fx_miss"] > 0, cold_log
    assert "(cold cache: 0 of" in cold_log and "(warm cache: " in warm_log
    assert warm["compile_cache"]["fx_miss"] == 0 and warm["compile_cache"]["fx_hit"] == cold["compile_cache"]["fx_miss"]
    assert any((xdg_homes / "xdg_cache_home" / "mgtutor" / "inductor").rglob("*.py"))
    assert warm["final_loss"] == pytest.approx(cold["final_loss"])  # the same model, from the cache


def compile_events(*phases: tuple[int, str]) -> list[Any]:
    from mgtutor.training.runs.events.writer import encode, parse_event

    return [parse_event(encode("step", rank, kind="compile", phase=phase, plan="default")) for rank, phase in phases]


@pytest.mark.parametrize("signal, phases, crashed", [
    ("SIGSEGV", [(0, "began"), (1, "began")], True),
    ("SIGABRT", [(1, "began"), (0, "began")], True),
    ("SIGSEGV", [(0, "began"), (0, "compiled")], False),  # it died later, in training
    ("SIGSEGV", [(0, "began"), (0, "fell_back")], False),
    ("SIGSEGV", [], False),  # an eager run
    ("SIGSEGV", [(1, "began")], False),  # another rank compiling is not the one that died
    ("SIGKILL", [(0, "began")], False),  # the OOM killer or a user, not the compiler
    (None, [(0, "began")], False),
], ids=["segv", "abort", "after compiled", "after fallback", "eager", "other rank", "sigkill", "exit code"])
def test_a_rank_that_died_of_a_native_crash_inside_the_compiler_is_told_apart(
        signal: str | None, phases: list[tuple[int, str]], crashed: bool) -> None:
    from mgtutor.training.runs.forensics.compile_crash import crashed_while_compiling
    from mgtutor.training.runs.events.types import CompileEvent
    from mgtutor.training.runs.records.record import FirstFailure, RunResult, RunStatus

    events = compile_events(*phases)
    assert all(isinstance(e, CompileEvent) for e in events)
    result = RunResult(status=RunStatus.FAILED, first_failure=FirstFailure(rank=0, exit_code=None if signal else 1,
                                                                           signal=signal))
    crash = crashed_while_compiling(result, events)
    assert (crash is not None) is crashed
    if crash:
        assert (crash.rank, crash.signal, crash.plan) == (0, signal, "default")


@pytest.mark.integration
def test_a_compiler_that_crashes_its_rank_is_trained_again_without_compiling(tmp_path: Path) -> None:
    """A real gloo rank whose compile dies of SIGSEGV (the fake at the compile boundary): the run fails as it
    happened, is named as a crash in the compiler, and trains again eagerly to the end. One rank: the fake kills
    every rank alike, each in its own compile (the first failure of two ranks, torchrun ending the other:
    test_cli_run.py::test_run_exits_with_the_first_failing_ranks_code)."""
    import subprocess

    from conftest import mgtutor_argv, no_gpu_env

    env = {**no_gpu_env(), compiling.FAKE_CRASH_ENV: "1"}
    proc = subprocess.run(mgtutor_argv("train", "--backend", "gloo", "--nproc", "1", "--compile", "default",
                                       "--batch-size", "8", "--dataset-size", "64", "--steps", "4", "--log-every", "2"),
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "run failed: rank " in proc.stderr and "(signal SIGSEGV)" in proc.stderr
    assert ("died of SIGSEGV while inductor compiled its step (default): a crash in the compiler, not in training; "
            "training again without compiling (--compile off)") in proc.stderr
    records = [Path(line.removeprefix("run record: ")) for line in proc.stdout.splitlines()
               if line.startswith("run record: ")]
    assert len(records) == 2
    first, second = (json.loads((r / "result.json").read_text()) for r in records)
    assert first["status"] == "failed" and first["first_failure"]["signal"] == "SIGSEGV"
    assert second["status"] == "finished"
    argv = json.loads((records[1] / "meta.json").read_text())["torchrun_argv"]
    assert argv[argv.index("--compile") + 1] == "off"
    assert "[rank 0] compile: off (--compile off)" in proc.stdout and "[rank 0] done: 4 steps" in proc.stdout


def test_a_compiler_crash_on_a_multi_node_job_is_not_started_again_by_one_node(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """One node alone cannot train again: its peers would never join. It says what to do on every node."""
    from mgtutor.training.runs.forensics.compile_crash import CompileCrash
    from mgtutor.tui.commands import train as command

    launches: list[str] = []

    def once(args: argparse.Namespace) -> tuple[int, CompileCrash | None]:
        launches.append(args.compile)
        return 1, CompileCrash(rank=3, signal="SIGSEGV", plan="default")

    def command_line(*argv: str) -> argparse.Namespace:
        parser = argparse.ArgumentParser()
        command.register(parser.add_subparsers())
        return parser.parse_args(["train", *argv])

    monkeypatch.setattr(command, "train_once", once)
    monkeypatch.setattr(command, "check", lambda args: None)
    args = command_line("--compile", "default", "--nnodes", "2", "--node-rank", "1", "--rdzv-endpoint", "node0:29500")
    assert command.main(args) == 1 and launches == ["default"]
    assert "start the job again with --compile off on every node" in capsys.readouterr().err
    assert command.main(command_line("--compile", "default")) == 1 and launches == ["default", "default", "off"]


@pytest.mark.parametrize("target, again", [
    (["-m", "mgtutor.training.worker.train", "--compile", "default", "--steps", "4"],
     ["-m", "mgtutor.training.worker.train", "--compile", "off", "--steps", "4"]),
    (["-m", "mgtutor.training.worker.train", "--steps", "4"],  # auto, the default, chose to compile
     ["-m", "mgtutor.training.worker.train", "--steps", "4", "--compile", "off"]),
    (["-m", "mgtutor.training.worker.train", "--compile", "off"], None),  # it did not compile: nothing to take away
    (["train.py", "--compile", "default"], None),  # the user's own script compiles as it was written
], ids=["default", "auto", "off", "script"])
def test_training_again_without_compiling_is_the_same_trainer_argv_with_compile_off(
        target: list[str], again: list[str] | None) -> None:
    from mgtutor.training.runs.forensics.compile_crash import CompileCrash, without_compiling

    assert without_compiling(target) == again
    crash = CompileCrash(rank=1, signal="SIGSEGV", plan="default")
    assert crash.said().endswith("training again without compiling (--compile off)")
    assert crash.said(nnodes=2).endswith("start the job again with --compile off on every node")
