"""The trainer's options, defined once and importable without torch.

The worker (`mgtutor.training.worker.train`) parses them; `mgtutor train` and `mgtutor bench scaling`
(which must never import torch) add the same options to their own parsers and turn the parsed
namespace back into the worker's argv with `worker_argv`.
"""
from __future__ import annotations

import argparse
from typing import Any

from mgtutor.training.foundation.i18n import N_, _

TRAINER_MODULE = "mgtutor.training.worker.train"
MODELS = ("tinycnn", "resnet18", "resnet50", "convnext_tiny", "vit_b_16")
DATASETS = ("synthetic", "cifar10", "imagefolder")
STRATEGIES = ("ddp", "single", "dp")
AMP_MODES = ("auto", "bf16", "fp16", "off")
COMPILE_MODES = ("auto", "off", "default", "reduce-overhead", "max-autotune")
INJECT_MODES = ("hang-before-init", "oom", "crash-rank", "nan-loss", "unused-param", "slow-rank", "no-sampler")

_GRAPHS_VALUES = {"auto": None, "on": True, "off": False}


def _graphs_value(text: str) -> bool | None:
    """--cuda-graphs auto|on|off as None|True|False: only an explicit "on" is truthy, so the checks
    that refuse graphs (no GPU, gloo, a step that changes) apply to what the user asked for, and auto
    is settled by the worker, which knows the device (cuda_graphs_choice)."""
    if text not in _GRAPHS_VALUES:
        raise argparse.ArgumentTypeError(f"invalid choice: {text!r} (choose from auto, on, off)")
    return _GRAPHS_VALUES[text]


def _batch_value(text: str) -> int | str:
    """--batch-size B or auto (the batch finder picks B in the ranks, where the GPU memory is known)."""
    if text == "auto":
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid batch size: {text!r} (a number, or auto)") from None


# (flag, kwargs) in the order they are shown in --help; dest is derived by argparse.
_OPTIONS: list[tuple[str, dict[str, Any]]] = [
    ("--model", dict(default="tinycnn", choices=MODELS, help=N_("network to train (default tinycnn: seconds on a CPU)"))),
    ("--data", dict(default="synthetic", choices=DATASETS,
                    help=N_("synthetic (made on the device, no input pipeline), cifar10 or imagefolder from --data-dir"))),
    ("--data-dir", dict(default=None, metavar="DIR", help=N_("local copy of the data set; nothing is ever downloaded"))),
    ("--workers", dict(type=int, default=4, metavar="N", help=N_("DataLoader worker processes for real data (default 4)"))),
    ("--strategy", dict(default="ddp", choices=STRATEGIES,
                        help=N_("ddp (default), single (one device, no wrapper) or dp (nn.DataParallel, one process)"))),
    ("--image-size", dict(type=int, default=32, metavar="PX", help=N_("32 = CIFAR-shaped, 224 = ImageNet-shaped"))),
    ("--batch-size", dict(type=_batch_value, default=64, metavar="B",
                          help=N_("samples per rank per micro-step (default 64); auto: the largest batch that fits on "
                               "every rank's GPU, found before training (as `mgtutor bench maxbatch` does), less a "
                               "5 %% margin"))),
    ("--dataset-size", dict(type=int, default=50_000, metavar="N", help=N_("synthetic samples per epoch (default 50000)"))),
    ("--lr", dict(type=float, default=0.05, help=N_("learning rate for one rank's batch (default 0.05)"))),
    ("--scale-lr", dict(default="none", choices=("none", "linear"), help=N_("linear: lr × world size"))),
    ("--warmup", dict(type=int, default=0, metavar="STEPS", help=N_("linear learning-rate warm-up steps"))),
    ("--amp", dict(default="auto", choices=AMP_MODES, help=N_("torch.amp autocast; auto = bf16 on GPU, off on CPU"))),
    ("--channels-last", dict(default="auto", choices=("auto", "on", "off"), help=N_("NHWC memory format; auto = on GPU"))),
    ("--compile", dict(default="auto", choices=COMPILE_MODES, metavar="{auto,off,default,reduce-overhead,max-autotune}",
                       help=N_("torch.compile the model. auto (the default) compiles a GPU run of a real model (not "
                            "tinycnn) at 128 px or more for 300 steps or more, inside the whole-step CUDA graph when the step is "
                            "graphed; CPU ranks, short runs and small images stay eager (the run says which and "
                            "why, and how long compiling took). Inductor's caches are kept in "
                            "$XDG_CACHE_HOME/mgtutor/inductor, so a second run compiles faster. A mode compiles "
                            "with it; off never compiles"))),
    ("--cuda-graphs", dict(nargs="?", const=True, default=None, type=_graphs_value,
                           metavar="{auto,on,off}",
                           help=N_("record the whole step as one CUDA graph and replay it (NVIDIA GPUs; ddp or "
                                "single): for small images, where launching kernels from Python sets the pace. "
                                "auto (the default) = on for a GPU run whose step is fixed (no --compile mode, "
                                "--warmup, --grad-accum, --amp fp16, --inject or DDP options), off otherwise; "
                                "the run says which and why at its start. A bare --cuda-graphs means on"))),
    ("--static-graph", dict(default="on", choices=("on", "off"), help=N_("DDP static_graph (default on)"))),
    ("--bucket-view", dict(default="on", choices=("on", "off"), help=N_("DDP gradient_as_bucket_view (default on)"))),
    ("--bucket-mb", dict(type=float, default=None, metavar="MB",
                         help=N_("gradients per all-reduce bucket (default: DDP's 25, 4 with --cuda-graphs)"))),
    ("--grad-accum", dict(type=int, default=1, metavar="K", help=N_("micro-steps per optimizer step (no_sync on all but the last)"))),
    ("--epochs", dict(type=int, default=1, help=N_("epochs, when --steps is not given"))),
    ("--steps", dict(type=int, default=None, metavar="S", help=N_("optimizer steps in total (overrides --epochs)"))),
    ("--seed", dict(type=int, default=0)),
    ("--log-every", dict(type=int, default=10, metavar="N",
                         help=N_("emit a step event every N steps (each one waits for the device: keep N > 1 on GPUs)"))),
    ("--timing-skip", dict(type=int, default=None, metavar="N",
                           help=N_("steps left out of the throughput (warm-up); default min(10, steps/5)"))),
    ("--checkpoint-dir", dict(default=None, metavar="DIR", help=N_("rank 0 writes DIR/checkpoint.pt atomically"))),
    ("--checkpoint-every", dict(type=int, default=0, metavar="S", help=N_("also checkpoint every S steps"))),
    ("--resume", dict(action="store_true", help=N_("continue from DIR/checkpoint.pt (every rank loads it)"))),
    ("--init-timeout", dict(type=float, default=60.0, metavar="S",
                            help=N_("seconds to wait for every rank to join (default 60, PyTorch's is 10–30 min)"))),
    ("--record-indices", dict(action="store_true", help=N_("write the sample indices each rank used to the run dir"))),
    ("--inject", dict(default=None, choices=INJECT_MODES, metavar="MODE",
                      help=N_("produce a real failure: hang-before-init, oom, crash-rank, nan-loss, unused-param, "
                              "slow-rank, no-sampler"))),  # INJECT_MODES, written out for the catalogue
    ("--inject-rank", dict(type=int, default=1, metavar="R", help=N_("the rank that misbehaves (default 1)"))),
    ("--inject-step", dict(type=int, default=3, metavar="S", help=N_("the step at which it does (default 3)"))),
    ("--slow-seconds", dict(type=float, default=0.25, metavar="S", help=N_("slow-rank: seconds of sleep per step"))),
]


def cuda_graphs_choice(args: argparse.Namespace, on_gpu: bool) -> tuple[bool, str]:
    """Whether the step runs as one CUDA graph, and why, in a phrase the run prints at its start (in the
    language in force: the trainer asks again in English for its start event).

    Auto turns graphs on only where the captured step is the step every time: a GPU, a model and
    data of fixed shapes (synthetic, or CIFAR-10/ImageFolder cut to one size, last partial batch
    dropped), nothing read back from the device per step (no fp16 loss scaler), a constant learning
    rate, and nothing that needs DDP's own hooks or eager kernels (--inject demos, DDP options).
    """
    if args.cuda_graphs is True:
        return True, _("on (--cuda-graphs)")
    if args.cuda_graphs is False:
        return False, _("off (--cuda-graphs off)")
    reasons = [
        (not on_gpu, N_("the ranks run on the CPU"), {}),
        (args.strategy == "dp", N_("--strategy dp (DataParallel) is not captured"), {}),
        # --compile default runs inside the captured step, as auto's choice does; the other modes graph themselves
        (args.compile not in ("off", "auto", "default"), N_("--compile {mode} has its own graph modes"),
         {"mode": args.compile}),
        (args.amp == "fp16", N_("--amp fp16's loss scaler reads its scale back every step"), {}),
        (args.grad_accum > 1, N_("--grad-accum changes the step from one micro-step to the next"), {}),
        (args.warmup > 0, N_("--warmup changes the learning rate every step"), {}),
        (args.inject is not None, N_("--inject {mode} shows a failure on the eager step"), {"mode": args.inject}),
        (args.static_graph == "off" or args.bucket_view == "off",
         N_("--static-graph/--bucket-view off ask for DDP itself, which the graph replaces"), {}),
    ]
    for applies, why, fields in reasons:
        if applies:
            off = N_("off (auto: {why}; --cuda-graphs on to force it)") if on_gpu else N_("off (auto: {why})")
            return False, _(off).format(why=_(why).format(**fields))
    data = _("synthetic data") if args.data == "synthetic" else _("{data} images of one size").format(data=args.data)
    return True, _("on (auto: GPU, fixed-shape step, {data}; --cuda-graphs off for the eager step)").format(data=data)


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
        elif flag == "--cuda-graphs":
            if value is not None:
                argv += [flag, "on" if value else "off"]
        elif value is not None and value != kwargs.get("default"):
            argv += [flag, str(value)]
    return argv


def check_train_options(args: argparse.Namespace) -> str | None:
    """The first problem with a combination of options, as one line, or None."""
    if args.cuda_graphs and getattr(args, "backend", None) == "gloo":
        return "--cuda-graphs needs NVIDIA GPUs (backend nccl); gloo ranks run on the CPU"
    if args.bucket_mb is not None and args.bucket_mb <= 0:
        return "--bucket-mb must be more than 0"
    if (args.batch_size != "auto" and args.batch_size < 1) or args.grad_accum < 1 or args.log_every < 1:
        return "--batch-size, --grad-accum and --log-every must be at least 1"
    if args.steps is not None and args.steps < 1:
        return "--steps must be at least 1"
    if args.data != "synthetic" and not args.data_dir:
        return (f"--data {args.data} needs --data-dir pointing at a local copy (nothing is downloaded); "
                "for CIFAR-10 that is the folder with cifar-10-batches-py/ from "
                "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz, or use --data synthetic")
    if args.resume and not args.checkpoint_dir:
        return "--resume needs --checkpoint-dir"
    if args.cuda_graphs and (args.warmup or args.grad_accum > 1 or args.strategy == "dp" or args.amp == "fp16"):
        return ("--cuda-graphs captures one fixed step: use it without --warmup, --grad-accum, "
                "--amp fp16 (its loss scale is read back every step) and --strategy dp")
    if args.cuda_graphs and args.compile in ("reduce-overhead", "max-autotune"):
        return (f"--compile {args.compile} records CUDA graphs of its own, which cannot sit inside the whole-step "
                "graph: use --compile default with --cuda-graphs (compiled inside the graph), or --cuda-graphs off")
    if args.cuda_graphs and args.inject == "unused-param":
        return "--inject unused-param shows DDP's own error, and --cuda-graphs does not use DDP's hooks: leave one out"
    if args.inject and args.inject_rank < 0:
        return "--inject-rank must be 0 or more"
    return None
