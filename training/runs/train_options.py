"""The trainer's options, defined once and importable without torch.

The worker (`mgtutor.training.worker.train`) parses them; `mgtutor train` and `mgtutor bench scaling`
(which must never import torch) add the same options to their own parsers and turn the parsed
namespace back into the worker's argv with `worker_argv`.
"""
from __future__ import annotations

import argparse
from typing import Any

MODELS = ("tinycnn", "resnet18", "resnet50")
DATASETS = ("synthetic", "cifar10", "imagefolder")
STRATEGIES = ("ddp", "single", "dp")
AMP_MODES = ("auto", "bf16", "fp16", "off")
COMPILE_MODES = ("off", "default", "reduce-overhead", "max-autotune")
INJECT_MODES = ("hang-before-init", "oom", "crash-rank", "nan-loss", "unused-param", "slow-rank", "no-sampler")

# (flag, kwargs) in the order they are shown in --help; dest is derived by argparse.
_OPTIONS: list[tuple[str, dict[str, Any]]] = [
    ("--model", dict(default="tinycnn", choices=MODELS, help="network to train (default tinycnn: seconds on a CPU)")),
    ("--data", dict(default="synthetic", choices=DATASETS,
                    help="synthetic (made on the device, no input pipeline), cifar10 or imagefolder from --data-dir")),
    ("--data-dir", dict(default=None, metavar="DIR", help="local copy of the data set; nothing is ever downloaded")),
    ("--workers", dict(type=int, default=4, metavar="N", help="DataLoader worker processes for real data (default 4)")),
    ("--strategy", dict(default="ddp", choices=STRATEGIES,
                        help="ddp (default), single (one device, no wrapper) or dp (nn.DataParallel, one process)")),
    ("--image-size", dict(type=int, default=32, metavar="PX", help="32 = CIFAR-shaped, 224 = ImageNet-shaped")),
    ("--batch-size", dict(type=int, default=64, metavar="B", help="samples per rank per micro-step (default 64)")),
    ("--dataset-size", dict(type=int, default=50_000, metavar="N", help="synthetic samples per epoch (default 50000)")),
    ("--lr", dict(type=float, default=0.05, help="learning rate for one rank's batch (default 0.05)")),
    ("--scale-lr", dict(default="none", choices=("none", "linear"), help="linear: lr × world size")),
    ("--warmup", dict(type=int, default=0, metavar="STEPS", help="linear learning-rate warm-up steps")),
    ("--amp", dict(default="auto", choices=AMP_MODES, help="torch.amp autocast; auto = bf16 on GPU, off on CPU")),
    ("--channels-last", dict(default="auto", choices=("auto", "on", "off"), help="NHWC memory format; auto = on GPU")),
    ("--compile", dict(default="off", choices=COMPILE_MODES, help="torch.compile mode (default off)")),
    ("--cuda-graphs", dict(action="store_true",
                           help="record the whole step as one CUDA graph and replay it: for small images, where "
                                "launching kernels from Python sets the pace (NVIDIA GPUs; ddp or single)")),
    ("--static-graph", dict(default="on", choices=("on", "off"), help="DDP static_graph (default on)")),
    ("--bucket-view", dict(default="on", choices=("on", "off"), help="DDP gradient_as_bucket_view (default on)")),
    ("--bucket-mb", dict(type=float, default=None, metavar="MB",
                         help="gradients per all-reduce bucket (default: DDP's 25, 4 with --cuda-graphs)")),
    ("--grad-accum", dict(type=int, default=1, metavar="K", help="micro-steps per optimizer step (no_sync on all but the last)")),
    ("--epochs", dict(type=int, default=1, help="epochs, when --steps is not given")),
    ("--steps", dict(type=int, default=None, metavar="S", help="optimizer steps in total (overrides --epochs)")),
    ("--seed", dict(type=int, default=0)),
    ("--log-every", dict(type=int, default=10, metavar="N",
                         help="emit a step event every N steps (each one waits for the device: keep N > 1 on GPUs)")),
    ("--timing-skip", dict(type=int, default=None, metavar="N",
                           help="steps left out of the throughput (warm-up); default min(10, steps/5)")),
    ("--checkpoint-dir", dict(default=None, metavar="DIR", help="rank 0 writes DIR/checkpoint.pt atomically")),
    ("--checkpoint-every", dict(type=int, default=0, metavar="S", help="also checkpoint every S steps")),
    ("--resume", dict(action="store_true", help="continue from DIR/checkpoint.pt (every rank loads it)")),
    ("--init-timeout", dict(type=float, default=60.0, metavar="S",
                            help="seconds to wait for every rank to join (default 60, PyTorch's is 10–30 min)")),
    ("--record-indices", dict(action="store_true", help="write the sample indices each rank used to the run dir")),
    ("--inject", dict(default=None, choices=INJECT_MODES, metavar="MODE",
                      help="produce a real failure: " + ", ".join(INJECT_MODES))),
    ("--inject-rank", dict(type=int, default=1, metavar="R", help="the rank that misbehaves (default 1)")),
    ("--inject-step", dict(type=int, default=3, metavar="S", help="the step at which it does (default 3)")),
    ("--slow-seconds", dict(type=float, default=0.25, metavar="S", help="slow-rank: seconds of sleep per step")),
]


def add_train_options(parser: argparse.ArgumentParser, skip: tuple[str, ...] = ()) -> None:
    for flag, kwargs in _OPTIONS:
        if flag not in skip:
            parser.add_argument(flag, **kwargs)


def _dest(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_")


def worker_argv(args: argparse.Namespace, **overrides: Any) -> list[str]:
    """The worker's argv for every option whose value differs from the default."""
    argv: list[str] = []
    for flag, kwargs in _OPTIONS:
        dest = _dest(flag)
        value = overrides.get(dest, getattr(args, dest, kwargs.get("default")))
        if kwargs.get("action") == "store_true":
            if value:
                argv.append(flag)
        elif value is not None and value != kwargs.get("default"):
            argv += [flag, str(value)]
    return argv


def check_train_options(args: argparse.Namespace) -> str | None:
    """The first problem with a combination of options, as one line, or None."""
    if args.cuda_graphs and getattr(args, "backend", None) == "gloo":
        return "--cuda-graphs needs NVIDIA GPUs (backend nccl); gloo ranks run on the CPU"
    if args.bucket_mb is not None and args.bucket_mb <= 0:
        return "--bucket-mb must be more than 0"
    if args.batch_size < 1 or args.grad_accum < 1 or args.log_every < 1:
        return "--batch-size, --grad-accum and --log-every must be at least 1"
    if args.steps is not None and args.steps < 1:
        return "--steps must be at least 1"
    if args.data != "synthetic" and not args.data_dir:
        return (f"--data {args.data} needs --data-dir pointing at a local copy (nothing is downloaded); "
                "for CIFAR-10 that is the folder with cifar-10-batches-py/ from "
                "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz, or use --data synthetic")
    if args.resume and not args.checkpoint_dir:
        return "--resume needs --checkpoint-dir"
    if args.cuda_graphs and (args.warmup or args.compile != "off" or args.grad_accum > 1 or args.strategy == "dp"
                             or args.amp == "fp16"):
        return ("--cuda-graphs captures one fixed step: use it without --warmup, --compile, --grad-accum, "
                "--amp fp16 (its loss scale is read back every step) and --strategy dp")
    if args.cuda_graphs and args.inject == "unused-param":
        return "--inject unused-param shows DDP's own error, and --cuda-graphs does not use DDP's hooks: leave one out"
    if args.inject and args.inject_rank < 0:
        return "--inject-rank must be 0 or more"
    return None
