"""`--cuda-graphs auto|on|off`: what auto decides, and the values' way from the CLI to the worker
(torch-free; the GPU side runs in tests/gpu/test_train_gpu.py, the CPU side in test_train.py)."""
from __future__ import annotations

import argparse

from mgtutor.training.runs.launch.train_options import add_train_options, cuda_graphs_choice, worker_argv


def parsed(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_train_options(parser)
    return parser.parse_args(list(argv))


def test_cuda_graphs_auto_is_on_only_for_a_fixed_gpu_step() -> None:
    assert cuda_graphs_choice(parsed(), on_gpu=True)[0] is True
    assert cuda_graphs_choice(parsed("--data", "cifar10", "--data-dir", "/d"), on_gpu=True)[0] is True
    assert cuda_graphs_choice(parsed("--strategy", "single"), on_gpu=True)[0] is True
    off = {"CPU": ((), False), "dp": (("--strategy", "dp"), True), "compile": (("--compile", "reduce-overhead"), True),
           "fp16": (("--amp", "fp16"), True), "accum": (("--grad-accum", "2"), True),
           "warmup": (("--warmup", "5"), True), "inject": (("--inject", "oom"), True),
           "ddp option": (("--static-graph", "off"), True)}
    for name, (argv, on_gpu) in off.items():
        on, why = cuda_graphs_choice(parsed(*argv), on_gpu=on_gpu)
        assert on is False and why.startswith("off (auto: "), (name, why)
    assert "CPU" in cuda_graphs_choice(parsed(), on_gpu=False)[1]
    # --compile default runs the compiled model inside the graph, as --compile auto's choice does
    assert cuda_graphs_choice(parsed("--compile", "default"), on_gpu=True)[0] is True
    # what the user says wins over auto, either way
    assert cuda_graphs_choice(parsed("--cuda-graphs", "off"), on_gpu=True) == (False, "off (--cuda-graphs off)")
    assert cuda_graphs_choice(parsed("--cuda-graphs", "--warmup", "5"), on_gpu=True)[0] is True


def test_cuda_graphs_values_round_trip_to_the_worker() -> None:
    assert [parsed(*a).cuda_graphs for a in ((), ("--cuda-graphs",), ("--cuda-graphs", "on"),
                                             ("--cuda-graphs", "off"), ("--cuda-graphs", "auto"))] \
        == [None, True, True, False, None]
    assert worker_argv(parsed()) == []
    assert worker_argv(parsed("--cuda-graphs", "--amp", "bf16")) == ["--amp", "bf16", "--cuda-graphs", "on"]
    assert worker_argv(parsed("--cuda-graphs", "off")) == ["--cuda-graphs", "off"]
    assert parsed(*worker_argv(parsed("--cuda-graphs", "off"))).cuda_graphs is False
