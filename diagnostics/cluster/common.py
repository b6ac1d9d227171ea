"""What every cluster job file shares: the target to run and the network interface names.

The target is what comes after `--` on the command line: `SCRIPT ARGS…` or `-m MODULE ARGS…`. It is
kept as a list from the command line to the job file, so no argument is ever re-split by a shell.
"""
from __future__ import annotations

import re

from mgtutor.training.runs.launch.launcher import torchrun_literal  # the same escaping as mgtutor run's
from mgtutor.training.foundation.i18n import _

__all__ = ["ClusterJobError", "after_dashdash", "check_counts", "check_ifname", "check_target", "torchrun_literal"]

# An interface list as NCCL and gloo take it: eth0, ib0,ib1, ^docker,lo (exclude), =eth0 (exact).
_IFNAME = re.compile(r"^\^?=?[A-Za-z0-9_.:,-]+$")


class ClusterJobError(ValueError):
    """Bad input for a job file, with what to give instead (one line for the user)."""


def after_dashdash(argv: list[str]) -> list[str]:
    """argparse's REMAINDER keeps the `--` that separates our flags from the target: drop it."""
    return argv[1:] if argv[:1] == ["--"] else argv


def check_target(target: list[str], command: str) -> None:
    if not target:
        raise ClusterJobError(_("nothing to run: give a script after --, e.g. mgtutor {command} --nodes 2 -- "
                                "train.py").format(command=command))
    if target[0] == "-m" and len(target) < 2:
        raise ClusterJobError(_("-m needs a module name"))


def check_ifname(flag: str, value: str | None) -> None:
    if value is not None and not _IFNAME.fullmatch(value):
        raise ClusterJobError(_("{flag} {value!r} is not an interface list (e.g. eth0, ib0 or ^docker,lo)").format(
            flag=flag, value=value))


def check_counts(nodes: int, gpus_per_node: int) -> None:
    if nodes < 1:
        raise ClusterJobError(_("{flag} must be at least 1 (got {value})").format(flag="--nodes", value=nodes))
    if gpus_per_node < 1:
        raise ClusterJobError(_("{flag} must be at least 1 (got {value})").format(flag="--gpus-per-node",
                                                                                value=gpus_per_node))
