"""`mgtutor bench scaling`: throughput on 1…N devices, speed-up and scaling efficiency."""
from __future__ import annotations

import argparse
import json
import sys

from mgtutor.training.foundation.i18n import N_, _, cell_width, ljust_cells, rjust_cells
from mgtutor.training.runs.nvml import inventory
from mgtutor.training.runs.launch.launcher import LaunchError
from mgtutor.training.runs.launch.train_options import check_train_options, worker_argv

from mgtutor.tui.commands.train_help import add_train_options_said
from mgtutor.diagnostics.bench.scaling import Point, ScalingError, scaling_report, shared_cores_note
from mgtutor.tui.errors import CliError, EXIT_FAILED
from mgtutor.tui.commands.options import add_backend, command_parser

_NOT_HERE = ("--strategy", "--inject", "--inject-rank", "--inject-step", "--slow-seconds", "--resume",
             "--checkpoint-dir", "--checkpoint-every", "--record-indices")


HELP = N_("training throughput on 1…N devices: speed-up and scaling efficiency")
DESCRIPTION = N_("Train the same model on 1 device without DDP (the baseline), then with DDP on 2…N devices, and "
                 "report samples/s, speed-up, efficiency = throughput_N / (N × baseline) and where a step's time "
                 "went (data wait vs compute + communication).")
EPILOG = N_("examples:\n  mgtutor bench scaling --model resnet18 --batch-size 512 --steps 300\n"
            "  mgtutor bench scaling --model resnet50 --image-size 224 --batch-size 128 --json\n"
            "  mgtutor bench scaling --backend gloo --max-gpus 2 --steps 20   (CPU ranks)")


def register(kinds: argparse._SubParsersAction) -> None:
    parser = command_parser(kinds, "scaling", HELP, DESCRIPTION, EPILOG)
    parser.add_argument("--max-gpus", type=int, default=None, metavar="N",
                        help=_("largest world size (default: every GPU, or 2 CPU ranks without GPUs)"))
    add_backend(parser)
    parser.add_argument("--json", action="store_true", help=_("print one JSON object instead of a table"))
    add_train_options_said(parser, skip=_NOT_HERE)
    parser.set_defaults(func=main, steps=100, log_every=25)


def describe_point(point: Point) -> str:
    eff = "–" if point.efficiency is None else f"{point.efficiency:.2f}"
    speed = "–" if point.speedup is None else f"{point.speedup:.2f}×"
    step = "–" if point.step_s is None else f"{1000 * point.step_s:.2f}"
    wait = "–" if point.data_wait_s is None else f"{1000 * point.data_wait_s:.2f}"
    comp = "–" if point.compute_s is None else f"{1000 * point.compute_s:.2f}"
    return (f"{point.world_size:>{ranks_width()}}  {point.strategy:<8} {point.samples_per_s:>12,.0f}  {speed:>8}  "
            f"{eff:>10}  {step:>8}  {wait:>9}  {comp:>12}")


def ranks_width() -> int:
    return max(5, cell_width(_("ranks")))  # the one heading that may be wider than its numbers in another language


def header() -> str:
    first = (rjust_cells(_("ranks"), ranks_width()) + "  " + ljust_cells(_("strategy"), 8) + " "
             + rjust_cells("samples/s", 12))
    return "  ".join([first, rjust_cells(_("speed-up"), 8), rjust_cells(_("efficiency"), 10),
                      rjust_cells(_("step ms"), 8), rjust_cells(_("data wait"), 9), rjust_cells(_("compute+comm"), 12)])


def main(args: argparse.Namespace) -> int:
    for flag in ("strategy", "inject", "resume", "checkpoint_dir", "record_indices"):
        setattr(args, flag, getattr(args, flag, None) if flag != "strategy" else "ddp")
    problem = check_train_options(args)
    if problem is None and args.max_gpus is not None and args.max_gpus < 1:
        problem = _("--max-gpus must be at least 1")
    if problem:
        raise CliError(problem)
    gpus = inventory().gpus
    backend = args.backend if args.backend != "auto" else ("nccl" if gpus else "gloo")
    if args.cuda_graphs and backend == "gloo":
        raise CliError(_("--cuda-graphs needs NVIDIA GPUs; none was found (or --backend gloo was given)"))
    max_devices = args.max_gpus or (len(gpus) if backend == "nccl" else 2)
    train_argv = worker_argv(args, strategy="ddp")

    def measured(point: Point) -> None:
        print("  " + _("measured {ranks} rank(s): {speed:,.0f} samples/s (compile: {compile})").format(
            ranks=point.world_size, speed=point.samples_per_s, compile=point.compile or "?"), file=sys.stderr, flush=True)

    if not args.json:
        then = (_("then DDP on 2…{devices}").format(devices=max_devices) if max_devices > 1 else
                _("and nothing to scale to: one device (--backend gloo --max-gpus 2 compares CPU ranks)"))
        print(_("scaling of {model} ({size}×{size}, batch {batch}/rank, {steps} steps) on {backend}: 1 device "
                "without DDP, {then}").format(model=args.model, size=args.image_size, batch=args.batch_size,
                                              steps=args.steps, backend=backend, then=then), flush=True)
    try:
        points = scaling_report(train_argv, max_devices, backend,
                                on_point=None if args.json else measured)
    except (LaunchError, ScalingError) as exc:
        raise CliError(str(exc), EXIT_FAILED) from None  # a run that failed, not bad input
    if args.json:
        print(json.dumps({"model": args.model, "image_size": args.image_size, "batch_size": args.batch_size,
                          "backend": backend, "baseline": "1 device, no DDP wrapper",
                          "note": shared_cores_note(backend, max_devices),
                          "points": [p.as_json() for p in points]}, indent=2))
    else:
        print(header())
        for point in points:
            print(describe_point(point))
        print(_("efficiency = samples/s on N ranks ÷ (N × samples/s of 1 device without DDP)"))
        note = shared_cores_note(backend, max_devices)
        if note:
            print(_("note: {note}").format(note=note))
    return 0
