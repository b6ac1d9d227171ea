"""`--compile auto|off|default|reduce-overhead|max-autotune`: whether the trainer compiles, how and why.

Auto compiles where the steady-state gain pays back the wait before the first step: a GPU run of a
real model (ResNet) for at least MIN_STEPS steps. When the step is already one CUDA graph
(`--cuda-graphs auto` said on), the compiled model runs inside that graph: fused kernels and one
launch per step. Measured on one H200 (tests/bench/compile_rule.py, the trainer, 500 steps), that is
1.26–1.44× the graphed eager step at every shape tried (ResNet-18 at 32² batch 256 and 512 and at 224²
batch 64, ResNet-50 at 224² batch 128). What differs is the pay-back: a graphed step at 224² takes tens
of milliseconds, so compiling (25–65 s cold, 3–15 s with a warm cache) is repaid within a few thousand
steps; at small images a step takes about 2 ms and saves about 0.4 ms, which repays a warm compile
after about 20,000 steps (a cold one after about 75,000). Hence SMALL_IMAGE_STEPS. Without the graph,
inductor alone does not remove the launch cost that limits small steps, so auto does not compile them.
Short runs and CPU ranks stay eager unless `--compile` names a mode. With several ranks the
compiled backward is one autograd node, so the bucketed all-reduce starts when it ends rather than
while it runs (measured on one GPU only; what that costs on several is not known yet).

Inductor's caches (FX graphs, autotuning, Triton kernels) live under mgtutor's own cache folder,
so the second run of the same model and shape skips most of the compiling.
"""
from __future__ import annotations

import argparse
import getpass
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from mgtutor.training.foundation.i18n import N_, _

CACHE_ENV = "TORCHINDUCTOR_CACHE_DIR"
MIN_STEPS = 300        # below it a run is a try-out: a cold compile (20–70 s) is most of its time
MIN_IMAGE_PX = 128     # from here a step is long enough that a few thousand of them repay the compile
SMALL_IMAGE_STEPS = 20_000  # below MIN_IMAGE_PX: ~0.4 ms saved per ~2 ms step repays a warm compile (~8 s)


@dataclass(frozen=True)
class CompilePlan:
    """What the run compiles: `mode` None is the eager step; `in_graph`: inside the whole-step graph."""
    mode: str | None
    in_graph: bool
    why: str

    @property
    def label(self) -> str:
        if self.mode is None:
            return "off"
        return f"{self.mode} inside the whole-step CUDA graph" if self.in_graph else self.mode


def compile_choice(args: argparse.Namespace, on_gpu: bool, graphs: bool, total_steps: int) -> CompilePlan:
    """The plan for this run, and a phrase for its start line saying why (like cuda_graphs_choice), in the
    language in force: the trainer keeps the English one for its events."""
    if args.compile == "off":
        return CompilePlan(None, False, _("off (--compile off)"))
    if args.compile != "auto":
        inside = args.compile == "default" and graphs
        said = (N_("{mode} inside the whole-step CUDA graph (--compile {mode})") if inside else N_("{mode} (--compile {mode})"))
        return CompilePlan(args.compile, inside, _(said).format(mode=args.compile))
    small = args.image_size < MIN_IMAGE_PX
    reasons = [
        (not on_gpu, N_("the ranks run on the CPU")),
        (args.inject is not None, N_("--inject {mode} shows a failure on the eager step")),
        (args.strategy == "dp", N_("--strategy dp (DataParallel) is not compiled")),
        (args.model == "tinycnn", N_("tinycnn trains in seconds, less than compiling it takes")),
        (total_steps < MIN_STEPS, N_("a run of {steps} steps (< {min_steps}) is over before compiling would pay back")),
        (small and graphs and total_steps < SMALL_IMAGE_STEPS,
         N_("at {size}² a graphed step takes milliseconds: compiling saves about a fifth of each, which repays the "
            "compile only after about {pay_back:,} steps, not {steps:,}")),
        (small and not graphs, N_("at {size}² the step is bound by kernel launches, which inductor alone does not remove")),
    ]
    fields = {"mode": args.inject, "steps": total_steps, "min_steps": MIN_STEPS, "size": args.image_size,
              "pay_back": SMALL_IMAGE_STEPS}
    for applies, why in reasons:
        if applies:
            off = N_("off (auto: {why}; --compile default to force it)") if on_gpu else N_("off (auto: {why})")
            return CompilePlan(None, False, _(off).format(why=_(why).format(**fields)))
    shape = _("{model} at {size}², {steps} steps").format(model=args.model, size=args.image_size, steps=total_steps)
    if graphs:
        return CompilePlan("default", True, _("inductor inside the whole-step CUDA graph (auto: GPU, {shape}: fused "
                                              "kernels, one launch per step; --compile off for the graphed eager "
                                              "step)").format(shape=shape))
    return CompilePlan("default", False, _("inductor (auto: GPU, {shape}: fused kernels; --compile off for the eager "
                                           "step)").format(shape=shape))
    return CompilePlan("default", False, f"inductor (auto: GPU, {shape}: fused kernels; --compile off for the "
                                         "eager step)")


def torch_default_cache() -> str:
    """Where inductor caches when nobody chose: it writes this into $TORCHINDUCTOR_CACHE_DIR itself the first
    time it asks (importing torchvision does), so that value is torch's default, not the user's choice."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = f"uid_{os.getuid()}"
    return os.path.join(tempfile.gettempdir(), "torchinductor_" + re.sub(r'[\\/:*?"<>|]', "_", user))


def cache_root() -> Path:
    """mgtutor's inductor cache: $TORCHINDUCTOR_CACHE_DIR if the user set one, else $XDG_CACHE_HOME/mgtutor/inductor."""
    chosen = os.environ.get(CACHE_ENV)
    if chosen and os.path.abspath(chosen) != torch_default_cache():
        return Path(chosen)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "mgtutor" / "inductor"


def use_mgtutor_cache() -> Path:
    """Point inductor (and the Triton kernels it builds, which it keeps under the same folder) at cache_root()."""
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.environ[CACHE_ENV] = str(root)
    return root
