"""The batch finder's anchors on one GPU: a bisection ground truth, accelerate's find_executable_batch_size
and Lightning's Tuner.scale_batch_size, each on the very step the finder measures (the trainer's model,
fused SGD with momentum, bf16 autocast, channels_last, the synthetic bank on the GPU).

    python tests/bench/maxbatch_anchors.py --method truth|accelerate|lightning --model resnet50 [--image-size 224]

Prints one JSON line: the largest batch the method found, its trials and seconds. Run each method in
its own process (an earlier OOM leaves the allocator fragmented). `mgtutor bench maxbatch --json`
gives the finder's own numbers; docs/benchmarks.md puts them side by side.
"""
from __future__ import annotations

import argparse
import gc
import json
import time
from types import SimpleNamespace

import torch

from mgtutor.training.worker.batch.batchfind import TrialStep, is_oom
from mgtutor.training.runs.batchfit import Bisect

STEPS = 3  # real steps per trial, as the measurement took them


def step_args(model: str, image_size: int) -> SimpleNamespace:
    return SimpleNamespace(model=model, image_size=image_size, amp="auto", channels_last="auto", seed=0, lr=0.05,
                           dataset_size=50_000)


def fits(step: TrialStep, batch: int) -> bool:
    ok = True
    try:
        step.run(batch, STEPS)
    except Exception as exc:
        if not is_oom(exc):
            raise
        ok = False
    gc.collect()
    torch.cuda.empty_cache()
    return ok


def truth(step: TrialStep) -> dict:
    """Doubling from 256 to the first failure, then bisection to the exact edge."""
    trials, batch, low = [], 256, 8
    while fits(step, batch):
        trials.append((batch, True))
        low, batch = batch, batch * 2
    trials.append((batch, False))
    search = Bisect(low, batch)
    while (nxt := search.next_batch()) is not None:
        ok = fits(step, nxt)
        trials.append((nxt, ok))
        search.record(nxt, ok)
    return {"max_batch": search.best_fit, "trials": trials}


def accelerate_anchor(step: TrialStep, start: int, warm: bool) -> dict:
    """`warm`: one step at batch 8 first, so cuBLAS's handle exists before the first try: called cold,
    accelerate's first OOM can come from `cublasCreate` (CUBLAS_STATUS_ALLOC_FAILED), which it does not
    take for an OOM, and the process ends."""
    from accelerate.utils import find_executable_batch_size

    trials: list = []
    if warm:
        step.run(8, 1)

    @find_executable_batch_size(starting_batch_size=start)
    def train(batch_size: int) -> int:
        trials.append(batch_size)
        step.run(batch_size, STEPS)
        return batch_size

    return {"max_batch": train(), "trials": trials, "starting_batch_size": start, "warm": warm}


def lightning_anchor(args: argparse.Namespace) -> dict:
    try:
        import lightning as L
        from lightning.pytorch.tuner import Tuner
    except ImportError:
        import pytorch_lightning as L  # type: ignore[no-redef]
        from pytorch_lightning.tuner import Tuner  # type: ignore[no-redef]
    import torch.nn.functional as F
    from torch.utils.data import DataLoader

    from mgtutor.training.worker.trainer.models import build_model

    # one CPU batch, grown to the largest size asked and sliced: the loader costs one copy to the GPU a
    # step, not decoding or randn (workers pickling gigabytes made the first version's trials slow)
    held = {"images": torch.zeros(0, 3, args.image_size, args.image_size), "labels": torch.zeros(0, dtype=torch.long)}

    def collate(indices: list[int]):
        if len(indices) > len(held["images"]):
            held["images"] = torch.zeros(len(indices), 3, args.image_size, args.image_size)
            held["labels"] = torch.arange(len(indices)) % 10
        return held["images"][:len(indices)], held["labels"][:len(indices)]

    class Module(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.batch_size = args.init_val
            self.net = build_model(args.model, image_size=args.image_size).to(memory_format=torch.channels_last)

        def train_dataloader(self):
            return DataLoader(range(1 << 20), batch_size=self.batch_size, collate_fn=collate, num_workers=0)

        def training_step(self, batch, _i):
            images, labels = batch
            return F.cross_entropy(self.net(images.contiguous(memory_format=torch.channels_last)), labels)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)

    trainer = L.Trainer(accelerator="gpu", devices=1, precision="bf16-mixed", max_steps=STEPS, logger=False,
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
    found = Tuner(trainer).scale_batch_size(Module(), mode="binsearch", steps_per_trial=STEPS,
                                            init_val=args.init_val, max_trials=args.max_trials)
    return {"max_batch": found, "init_val": args.init_val, "max_trials": args.max_trials}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--method", choices=("truth", "accelerate", "lightning"), required=True)
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--start", type=int, default=8192, help="accelerate's starting_batch_size")
    parser.add_argument("--warm", action="store_true", help="accelerate: one small step before it starts")
    parser.add_argument("--init-val", type=int, default=256, help="Lightning's first batch")
    parser.add_argument("--max-trials", type=int, default=25, help="Lightning's cap on trials (its default: 25)")
    args = parser.parse_args()
    began = time.perf_counter()
    if args.method == "lightning":
        out = lightning_anchor(args)
    else:
        step = TrialStep(step_args(args.model, args.image_size), torch.device("cuda", 0))
        out = truth(step) if args.method == "truth" else accelerate_anchor(step, args.start, args.warm)
    out.update(method=args.method, model=args.model, image_size=args.image_size, steps_per_trial=STEPS,
               seconds=round(time.perf_counter() - began, 2), gpu=torch.cuda.get_device_name(0), torch=torch.__version__)
    print("ANCHOR " + json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
