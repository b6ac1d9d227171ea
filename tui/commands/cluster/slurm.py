"""`mgtutor slurm -- SCRIPT ARGS`: write (and optionally submit) an sbatch script for a multi-node job."""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys

from mgtutor.training.foundation.i18n import N_, _
from mgtutor.diagnostics.cluster.common import after_dashdash
from mgtutor.diagnostics.cluster.slurm import DEFAULT_PORT, SlurmError, SlurmJob, sbatch_script
from mgtutor.tui.commands.cluster.flags import add_env_flags, add_job_name, add_output_and_target, job_parser
from mgtutor.tui.commands.options import add_rdzv_port, write_output_file
from mgtutor.tui.errors import CliError

HELP = N_("write an sbatch script for a multi-node torchrun job (--submit: sbatch it)")
DESCRIPTION = N_("Write a Slurm batch script that runs SCRIPT on N nodes x G GPUs with torchrun's c10d rendezvous, "
                 "each line explained in a comment. Slurm is only needed to run it.")
EPILOG = N_("""examples:
  mgtutor slurm --nodes 2 --gpus-per-node 8 -- train.py --epochs 10
  mgtutor slurm --nodes 4 --gpus-per-node 4 --partition gpu --time 02:00:00 -o job.sbatch -- -m mgtutor.training.worker.train --model resnet50
  mgtutor slurm --nodes 2 --gpus-per-node 8 --nccl-ifname ib0 --gloo-ifname eth0 --submit -- train.py

The script starts one torchrun per node with srun; the first node of the allocation hosts the
c10d rendezvous, and the job id is the rendezvous id. Check a written script with `bash -n FILE`.""")


def register(sub: argparse._SubParsersAction) -> None:
    parser = job_parser(sub, "slurm", HELP, DESCRIPTION, EPILOG, node_is=_("nodes"))
    parser.add_argument("--partition", default=None, metavar="P", help=_("Slurm partition (queue): letters, digits, . _ - (several: gpu,gpu-long)"))
    parser.add_argument("--time", default=None, metavar="T", help=_("wall-clock limit, e.g. 30, 02:00:00 or 1-00:00:00"))
    add_job_name(parser, "--job-name", help=N_("job name: letters, digits, . _ + - (default mgtutor)"))
    add_rdzv_port(parser, default=DEFAULT_PORT, help=N_("rendezvous port on the first node (default {port})"))
    parser.add_argument("--cpus-per-node", type=int, default=None, metavar="C", help=_("CPU cores per node"))
    add_env_flags(parser, env_is="export")
    parser.add_argument("--gloo-ifname", default=None, metavar="IF", help=_("export GLOO_SOCKET_IFNAME=IF"))
    parser.add_argument("--python", default="python3", metavar="PY",
                        help=_("the Python with torch on the nodes (default python3)"))
    parser.add_argument("--submit", action="store_true", help=_("submit with sbatch (writes FILE, default NAME.sbatch)"))
    add_output_and_target(parser)
    parser.set_defaults(func=main)


def _env_pairs(items: list[str]) -> dict[str, str]:
    pairs = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.isidentifier():
            raise CliError(_("--env {item!r}: give KEY=VALUE with KEY a shell variable name").format(item=item))
        pairs[key] = value
    return pairs


def main(args: argparse.Namespace) -> int:
    job = SlurmJob(target=after_dashdash(args.target), nodes=args.nodes, gpus_per_node=args.gpus_per_node,
                   partition=args.partition, time=args.time, job_name=args.job_name, port=args.rdzv_port, nccl_ifname=args.nccl_ifname,
                   gloo_ifname=args.gloo_ifname, cpus_per_node=args.cpus_per_node, python=args.python,
                   extra_env=_env_pairs(args.env))
    try:
        text = sbatch_script(job)
    except SlurmError as exc:
        raise CliError(str(exc)) from None
    path = write_output_file(text, args.output or (f"{args.job_name}.sbatch" if args.submit else None), mode=0o755,
                          force=args.force)
    if path is None or not args.submit:
        return 0
    sbatch = shutil.which("sbatch")
    if sbatch is None:
        print("mgtutor slurm: " + _("sbatch not found: this is not a Slurm login node. Copy {path} to one and run "
                                    "{command} there.").format(path=path, command=f"`sbatch {path.name}`"), file=sys.stderr)
        return 1
    done = subprocess.run([sbatch, str(path)], capture_output=True, text=True)
    sys.stdout.write(done.stdout)
    sys.stderr.write(done.stderr)
    return done.returncode
