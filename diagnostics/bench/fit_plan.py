"""What `mgtutor fit` needs before its first trial, from a command line (the CLI) or from a past run (the
Troubleshoot screen, the Monitor's OOM banner): the script's batch option and accumulation option, read
from its argparse options, and whether there is device memory to fit at all."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from mgtutor.diagnostics.bench.scripttrial import DEFAULT_STEPS, TrialPlan
from mgtutor.diagnostics.check.script import CheckError
from mgtutor.diagnostics.check.script_options import ScriptOption, accumulation_option, find_batch_option, option_called
from mgtutor.training.foundation.i18n import _
from mgtutor.training.runs.nvml import inventory

FAKE_ENV = "MGTUTOR_FAKE_CUDA_MEMORY"  # the tests' stand-in at the CUDA boundary (training/worker/batch/fit_trial.py)


class FitError(Exception):
    """mgtutor fit cannot start on this command: one line that says what to do."""


def discover(target: list[str], batch_arg: str | None, cwd: str | None = None) -> tuple[ScriptOption, ScriptOption | None]:
    """The batch option (and the accumulation option) of the script, or FitError with the fix."""
    if target[0] == "-m":
        if not batch_arg:
            raise FitError(_("a module (-m) is not read for its options: name the batch option with --batch-arg NAME"))
        return option_called(batch_arg), None
    try:
        option, options = find_batch_option(Path(cwd or ".") / target[0], batch_arg)
    except CheckError as exc:
        raise FitError(str(exc)) from None
    return option, accumulation_option(options)


def no_device_memory() -> str | None:
    """Why there is nothing to fit here (no NVIDIA GPU), or None."""
    if os.environ.get(FAKE_ENV) or inventory().gpus:
        return None
    return _("mgtutor fit measures GPU memory, and no NVIDIA GPU was found: on CPU ranks there is no device memory "
             "to fit a batch to (host memory is not the limit it finds)")


def plan_for(target: list[str], nproc: int | None = None, backend: str = "auto", batch_arg: str | None = None,
             steps: int = DEFAULT_STEPS, timeout_s: float = 600.0, cwd: str | None = None) -> TrialPlan:
    option, accumulation = discover(target, batch_arg, cwd)
    why = no_device_memory()
    if why:
        raise FitError(why)
    return TrialPlan(target, option, nproc=nproc, backend=backend, steps=steps, timeout_s=timeout_s, cwd=cwd,
                     accumulation=accumulation)


def plan_for_run(record: Any) -> TrialPlan:
    """The trials for a past run's own command, on as many ranks as it had."""
    meta = record.meta()
    if not meta.target or meta.speaks_events():
        raise FitError(_("run {run_id} is not a script of yours: mgtutor fit searches a script's batch option").format(
            run_id=record.run_id))
    return plan_for(list(meta.target), meta.nproc_per_node or None, meta.backend or "auto", cwd=meta.cwd or None)
