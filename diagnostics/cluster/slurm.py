"""An sbatch script for a multi-node torchrun job, every line explained.

Slurm gives the nodes; torchrun (one per node, started by srun) gives the ranks. The rendezvous
host is the allocation's first node, found at run time with `scontrol show hostnames`, and the
job id is the rendezvous id, so two jobs never join each other. Pure text: Slurm is not needed
to write the script, only to run it.
"""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

from mgtutor.training.foundation.i18n import N_, _

from mgtutor.diagnostics.cluster.common import (
    ClusterJobError, check_counts, check_ifname, check_target, torchrun_literal,
)

DEFAULT_PORT = 29500
# Values that land in an #SBATCH line, each matched whole (fullmatch: a `$` would let a trailing
# newline through, and a newline in a directive value starts a line of the caller's choosing).
_TIME = re.compile(r"([0-9]+-)?[0-9]+(:[0-9]{1,2}){0,2}")  # M, M:S, H:M:S, D-H, D-H:M, D-H:M:S; ASCII digits (\d takes ３０)
_JOB_NAME = re.compile(r"[A-Za-z0-9_.+-]+")
_PARTITION = re.compile(r"[A-Za-z0-9_.-]+(,[A-Za-z0-9_.-]+)*")  # one partition, or several: gpu,gpu-long


class SlurmError(ClusterJobError):
    """Bad input for the script, with what to give instead."""


@dataclass
class SlurmJob:
    target: list[str]  # SCRIPT ARGS… or -m MODULE ARGS…
    nodes: int = 2
    gpus_per_node: int = 1
    partition: str | None = None
    time: str | None = None
    job_name: str = "mgtutor"
    port: int = DEFAULT_PORT
    nccl_ifname: str | None = None
    gloo_ifname: str | None = None
    cpus_per_node: int | None = None
    python: str = "python3"
    extra_env: dict[str, str] = field(default_factory=dict)

    def check(self) -> None:
        try:
            check_target(self.target, "slurm")
            check_counts(self.nodes, self.gpus_per_node)
            check_ifname("--nccl-ifname", self.nccl_ifname)
            check_ifname("--gloo-ifname", self.gloo_ifname)
        except ClusterJobError as exc:
            raise SlurmError(str(exc)) from None
        if self.cpus_per_node is not None and self.cpus_per_node < 1:
            raise SlurmError(_("{flag} must be at least 1 (got {value})").format(flag="--cpus-per-node",
                                                                               value=self.cpus_per_node))
        if not 1024 <= self.port < 65536:
            raise SlurmError(_("--port must be from 1024 to 65535 (got {port})").format(port=self.port))
        if self.time is not None and not _TIME.fullmatch(self.time):
            raise SlurmError(_("--time {time!r} is not a Slurm time: use MM, HH:MM:SS or D-HH:MM:SS").format(
                time=self.time))
        if not _JOB_NAME.fullmatch(self.job_name):
            raise SlurmError(_("--job-name {name!r}: use letters, digits, . _ + -").format(name=self.job_name))
        if self.partition is not None and not _PARTITION.fullmatch(self.partition):
            raise SlurmError(_("--partition {name!r}: use letters, digits, . _ - (several partitions: "
                               "gpu,gpu-long)").format(name=self.partition))


def _line(code: str, why: str) -> list[str]:
    """The explanation goes above its line: sbatch reads `#SBATCH` lines whole, comments included."""
    if code.startswith("#SBATCH") and ("\n" in code or "\r" in code or "#" in code[1:]):
        raise SlurmError(_("refusing to write the directive {code!r}: a value holds a newline or #").format(
            code=code))  # checked above too
    return [f"# {_(why)}", code]


# The comment above the launch line (its lines as they are written into the script).
LAUNCH_NOTE = N_("srun starts one task per node (--ntasks-per-node=1); each runs torchrun, which starts\n"
                 "--nproc-per-node={gpus} ranks and gives them RANK, LOCAL_RANK, WORLD_SIZE.\n"
                 "c10d rendezvous: all nodes meet at head_node:rdzv_port; the job id keeps jobs apart;\n"
                 "ranks are numbered once every node has joined. --max-restarts 0: a failure ends the job.\n"
                 "A $ in the arguments is written $$: torchrun reads $$ as $ (it fills in ${{local_rank}}).")


def sbatch_script(job: SlurmJob) -> str:
    """The script's text; SlurmError on bad input."""
    job.check()
    q = shlex.quote
    lines = [
        "#!/bin/bash",
        "# " + _("Written by `mgtutor slurm`: {nodes} node(s) x {gpus} GPU(s), one torchrun per node, c10d "
                 "rendezvous on the first node.").format(nodes=job.nodes, gpus=job.gpus_per_node),
        "# " + _("Submit with: {command}   (check it first: {check})").format(command="sbatch THIS_FILE",
                                                                           check="bash -n THIS_FILE"),
        "",
    ]
    lines += _line(f"#SBATCH --job-name={job.job_name}", N_("The name squeue and the log file show."))
    lines += _line(f"#SBATCH --nodes={job.nodes}", N_("How many machines; each runs one torchrun."))
    lines += _line("#SBATCH --ntasks-per-node=1",
                   N_("One task per node: torchrun itself starts the ranks, so Slurm must not start one per GPU."))
    lines += _line(f"#SBATCH --gpus-per-node={job.gpus_per_node}", N_("GPUs reserved on each node = ranks per node."))
    if job.cpus_per_node:
        lines += _line(f"#SBATCH --cpus-per-task={job.cpus_per_node}",
                       N_("CPU cores for the node's torchrun and its ranks (data loading needs them)."))
    if job.partition:
        lines += _line(f"#SBATCH --partition={job.partition}", N_("The queue (partition) to run in."))
    if job.time:
        lines += _line(f"#SBATCH --time={job.time}", N_("Wall-clock limit; Slurm kills the job after it."))
    lines += _line(f"#SBATCH --output={job.job_name}-%j.out", N_("All nodes' output in one file; %j is the job id."))
    lines += [""]
    lines += _line("set -euo pipefail", N_("Stop at the first failing command or unset variable."))
    lines += _line('head_node=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | sed -n 1p)',
                   N_("The first node of the allocation hosts the rendezvous store (sed reads the whole list: "
                      "`head -n 1` could end scontrol with SIGPIPE, which pipefail makes fatal)."))
    lines += _line(f"rdzv_port={job.port}", N_("A port free on that node; every node connects to it."))
    if job.nccl_ifname:
        lines += _line(f"export NCCL_SOCKET_IFNAME={q(job.nccl_ifname)}",
                       N_("The interface NCCL uses to bootstrap between nodes (the one the nodes share)."))
    if job.gloo_ifname:
        lines += _line(f"export GLOO_SOCKET_IFNAME={q(job.gloo_ifname)}",
                       N_("The interface gloo uses between nodes (otherwise it takes the hostname's address)."))
    for key, value in sorted(job.extra_env.items()):
        lines += _line(f"export {key}={q(value)}", N_("Given with --env."))
    if job.cpus_per_node:
        lines += _line(f"export OMP_NUM_THREADS=$(( {job.cpus_per_node} / {job.gpus_per_node} > 0 ? "
                       f"{job.cpus_per_node} / {job.gpus_per_node} : 1 ))",
                       N_("Share the node's cores between its ranks (torchrun would set 1)."))
    lines += _line('echo "rendezvous on ${head_node}:${rdzv_port}, job ${SLURM_JOB_ID}, ${SLURM_JOB_NUM_NODES} node(s)"',
                   N_("Say where the nodes meet: the first thing to check when a node never joins."))
    lines += [""]
    target = " ".join(q(torchrun_literal(part)) for part in job.target)
    lines += [f"# {line}" for line in _(LAUNCH_NOTE).format(gpus=job.gpus_per_node).splitlines()]
    lines += [
        f"srun --kill-on-bad-exit=1 {q(job.python)} -m torch.distributed.run \\",
        '    --nnodes "$SLURM_JOB_NUM_NODES" \\',
        f"    --nproc-per-node {job.gpus_per_node} \\",
        "    --rdzv-backend c10d \\",
        '    --rdzv-endpoint "${head_node}:${rdzv_port}" \\',
        '    --rdzv-id "$SLURM_JOB_ID" \\',
        "    --max-restarts 0 \\",
        f"    {target}",
    ]
    return "\n".join(lines) + "\n"
