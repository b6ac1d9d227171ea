"""`mgtutor bench maxbatch`: the largest batch that trains on every rank, found in a few trials and proven."""
from __future__ import annotations

import argparse
import json
import os
import sys

from mgtutor.training.foundation.i18n import N_, _
from mgtutor.diagnostics.bench.maxbatch import FinderOptions, answer, start
from mgtutor.training.runs.launch.launcher import said_device_note
from mgtutor.training.runs.nvml import inventory
from mgtutor.training.runs.launch.train_options import AMP_MODES, MODELS
from mgtutor.tui.commands.run import FollowEnded, describe_result, print_failure_diagnosis, stream_run
from mgtutor.tui.errors import EXIT_FAILED, CliError
from mgtutor.tui.run_words import record_line
from mgtutor.tui.commands.options import add_nproc, command_parser, started

FAKE_ENV = "MGTUTOR_FAKE_CUDA_MEMORY"  # the tests' stand-in at the CUDA boundary (training/worker/batch/batchfind.py)

HELP = N_("the largest batch that trains on every rank's GPU, found in ~10 trials")
DESCRIPTION = N_("Find the largest per-rank batch of the built-in trainer that fits on every rank's GPU, with the "
                 "memory it takes: fixed bytes (weights, gradients, optimizer state) and bytes per sample. Each "
                 "trial is printed as it ends.")
EPILOG = N_("""examples:
  mgtutor bench maxbatch --model resnet50 --image-size 224
  mgtutor bench maxbatch --model vit_b_16 --amp off            (how much mixed precision buys)
  mgtutor bench maxbatch --model resnet50 --global-batch 8192  (per-rank batch x accumulation for 8192)
  mgtutor bench maxbatch --nproc 2 --share-gpu --json          (two ranks on GPU 0 agree on one batch)

How it searches: trials at batches 8, 16, 32 and one a fourth of the way out measure the peak memory
of the trainer's real step (2 steps each); a straight line through them (fixed bytes + bytes per
sample) predicts the largest batch; trials next to the prediction confirm it to 0.5 {percent}. Every rank
runs each trial and the ranks agree on the smallest answer; an out-of-memory on one rank is caught
there and counts as "does not fit", so no rank is ever left waiting. The chosen batch keeps
--margin {percent} of the memory free, and --prove-steps steps at it show that it holds.""")


def register(kinds: argparse._SubParsersAction) -> None:
    p = command_parser(kinds, "maxbatch", HELP, DESCRIPTION, EPILOG)
    p.add_argument("--model", default="resnet50", choices=MODELS, help=_("network (default resnet50)"))
    p.add_argument("--image-size", type=int, default=224, metavar="PX", help=_("image side in pixels (default 224)"))
    add_nproc(p, help=N_("ranks (default: one per GPU)"))
    p.add_argument("--amp", default="auto", choices=AMP_MODES, help=_("autocast as in training (auto = bf16 on GPU)"))
    p.add_argument("--channels-last", default="auto", choices=("auto", "on", "off"), help=_("NHWC (auto = on GPU)"))
    p.add_argument("--global-batch", type=int, default=None, metavar="G",
                   help=_("also split G samples per optimizer step into per-rank batch × gradient accumulation"))
    p.add_argument("--margin", type=float, default=5.0, metavar="PCT",
                   help=_("GPU memory kept free below the measured maximum, in %% (default 5: the allocator's "
                          "fragmentation over a long run, NCCL's buffers, DDP's buckets)"))
    p.add_argument("--max-batch", type=int, default=None, metavar="B", help=_("never try a batch above B"))
    p.add_argument("--prove-steps", type=int, default=20, metavar="N",
                   help=_("steps trained at the chosen batch to prove it (default 20; 0 skips)"))
    p.add_argument("--share-gpu", action="store_true",
                   help=_("put every rank on GPU 0 (agreement over gloo): what a script without set_device does"))
    p.add_argument("--json", action="store_true", help=_("print one JSON object with the numbers and every trial"))
    p.set_defaults(func=main)


def options_from(args: argparse.Namespace) -> FinderOptions:
    options = FinderOptions(model=args.model, image_size=args.image_size, nproc=args.nproc, amp=args.amp,
                            channels_last=args.channels_last, global_batch=args.global_batch,
                            margin_pct=args.margin, max_batch=args.max_batch, prove_steps=args.prove_steps,
                            share_gpu=args.share_gpu)
    problem = options.problem()
    if problem:
        raise CliError(problem)
    if not os.environ.get(FAKE_ENV) and not inventory().gpus:
        raise CliError(_("the batch finder measures GPU memory, and no NVIDIA GPU was found; on CPU ranks pick "
                         "--batch-size yourself (host memory is not the limit it finds)"))
    return options


def main(args: argparse.Namespace) -> int:
    options = options_from(args)
    run = started(start, options)
    meta = run.record.meta()
    print("mgtutor: " + _("batch finder for {model} at {size}×{size} on {ranks} rank(s) — {device}").format(
        model=options.model, size=options.image_size, ranks=meta.world_size, device=said_device_note(meta)),
        file=sys.stderr, flush=True)
    try:
        final = stream_run(run, out=sys.stderr if args.json else sys.stdout)
    except FollowEnded as end:
        return end.exit_code
    assert final.result is not None
    found = answer(run.record)
    if args.json:
        print(json.dumps({"run_id": run.record.run_id, **found.to_json()}, indent=2))
    else:
        print("\n".join(found.summary_lines()))
        print(record_line(run.record.path))
    if found.result is None or found.result.proved is False:
        print(describe_result(final.result), file=sys.stderr)
        print_failure_diagnosis(run, final)
        raise CliError(_("the batch finder did not finish (above: the ranks' own output)"), EXIT_FAILED)
    return 0
