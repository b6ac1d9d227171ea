"""The trainer's option help in the language in force, for `mgtutor train` and `mgtutor bench scaling`.

The options are defined once, in training/runs/train_options.py, where the rank processes parse them in
English; their help is marked for the catalogue here, where `--help` shows it. An English help changed
there and not here stays English under `--lang zh` (tests/test_i18n_cli_help.py says which)."""
from __future__ import annotations

import argparse

from mgtutor.training.runs.i18n import N_, _
from mgtutor.training.runs.train_options import add_train_options

TRAIN_OPTION_HELP = (
    N_("network to train (default tinycnn: seconds on a CPU)"),
    N_("synthetic (made on the device, no input pipeline), cifar10 or imagefolder from --data-dir"),
    N_("local copy of the data set; nothing is ever downloaded"),
    N_("DataLoader worker processes for real data (default 4)"),
    N_("ddp (default), single (one device, no wrapper) or dp (nn.DataParallel, one process)"),
    N_("32 = CIFAR-shaped, 224 = ImageNet-shaped"),
    N_("samples per rank per micro-step (default 64); auto: the largest batch that fits on every rank's GPU,"
       " found before training (as `mgtutor bench maxbatch` does), less a 5 %% margin"),
    N_("synthetic samples per epoch (default 50000)"),
    N_("learning rate for one rank's batch (default 0.05)"),
    N_("linear: lr × world size"),
    N_("linear learning-rate warm-up steps"),
    N_("torch.amp autocast; auto = bf16 on GPU, off on CPU"),
    N_("NHWC memory format; auto = on GPU"),
    N_("torch.compile the model. auto (the default) compiles a GPU run of a real model (not tinycnn) at 128 "
       "px or more for 300 steps or more, inside the whole-step CUDA graph when the step is graphed; CPU "
       "ranks, short runs and small images stay eager (the run says which and why, and how long compiling "
       "took). Inductor's caches are kept in $XDG_CACHE_HOME/mgtutor/inductor, so a second run compiles "
       "faster. A mode compiles with it; off never compiles"),
    N_("record the whole step as one CUDA graph and replay it (NVIDIA GPUs; ddp or single): for small "
       "images, where launching kernels from Python sets the pace. auto (the default) = on for a GPU run "
       "whose step is fixed (no --compile mode, --warmup, --grad-accum, --amp fp16, --inject or DDP "
       "options), off otherwise; the run says which and why at its start. A bare --cuda-graphs means on"),
    N_("DDP static_graph (default on)"),
    N_("DDP gradient_as_bucket_view (default on)"),
    N_("gradients per all-reduce bucket (default: DDP's 25, 4 with --cuda-graphs)"),
    N_("micro-steps per optimizer step (no_sync on all but the last)"),
    N_("epochs, when --steps is not given"),
    N_("optimizer steps in total (overrides --epochs)"),
    N_("emit a step event every N steps (each one waits for the device: keep N > 1 on GPUs)"),
    N_("steps left out of the throughput (warm-up); default min(10, steps/5)"),
    N_("rank 0 writes DIR/checkpoint.pt atomically"),
    N_("also checkpoint every S steps"),
    N_("continue from DIR/checkpoint.pt (every rank loads it)"),
    N_("seconds to wait for every rank to join (default 60, PyTorch's is 10–30 min)"),
    N_("write the sample indices each rank used to the run dir"),
    N_("produce a real failure: hang-before-init, oom, crash-rank, nan-loss, unused-param, slow-rank, no-"
       "sampler"),
    N_("the rank that misbehaves (default 1)"),
    N_("the step at which it does (default 3)"),
    N_("slow-rank: seconds of sleep per step"),
)


def add_train_options_said(parser: argparse.ArgumentParser, skip: tuple[str, ...] = ()) -> None:
    """`add_train_options`, each option's help translated as it is added."""
    first = len(parser._actions)
    add_train_options(parser, skip)
    for action in parser._actions[first:]:
        action.help = _(action.help) if action.help else action.help
