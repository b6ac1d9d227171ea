"""`mgtutor k8s -- SCRIPT ARGS`: a Kubernetes manifest (TrainJob or PyTorchJob) for a multi-node job."""
from __future__ import annotations

import argparse
import json
import sys

from mgtutor.training.foundation.i18n import N_, _
from mgtutor.diagnostics.cluster.common import ClusterJobError, after_dashdash
from mgtutor.diagnostics.cluster.k8s_explain import walkthrough
from mgtutor.diagnostics.cluster.k8s_job import APIS, DEFAULT_RUNTIME, DEFAULT_SHM, K8sJob
from mgtutor.diagnostics.cluster.k8s_names import check_env, check_label, parse_claim, parse_pairs
from mgtutor.tui.commands.cluster.flags import add_env_flags, add_job_name, add_output_and_target, job_parser
from mgtutor.tui.commands.options import write_output_file
from mgtutor.tui.errors import CliError

HELP = N_("write a Kubernetes manifest (TrainJob or PyTorchJob) for a multi-node job")
DESCRIPTION = N_("Write a Kubernetes manifest that runs SCRIPT on N nodes x G GPUs with torchrun, every non-obvious "
                 "field explained in a comment. Kubernetes is only needed to run it.")
EPILOG = N_("""examples:
  mgtutor k8s --nodes 2 --gpus-per-node 8 --image nvcr.io/nvidia/pytorch:24.12-py3 -- train.py --epochs 10
  mgtutor k8s --api pytorchjob --nodes 4 --gpus-per-node 8 --image IMG --pvc ckpt:/ckpt -o job.yaml -- train.py
  mgtutor k8s --nodes 2 --gpus-per-node 8 --image IMG --nccl-ifname eth0 --explain -- -m mypkg.train

trainjob (the default) is Kubeflow Trainer v2's TrainJob on a ClusterTrainingRuntime; pytorchjob is
the Training Operator v1's PyTorchJob. Both run `torchrun SCRIPT ARGS` in one pod per node. Check the
file against the cluster with `kubectl apply --dry-run=server -f FILE`; --explain tells how to
collect the pods' logs for `mgtutor diagnose`.""")


def register(sub: argparse._SubParsersAction) -> None:
    parser = job_parser(sub, "k8s", HELP, DESCRIPTION, EPILOG, node_is=_("nodes = pods, one per node"))
    parser.add_argument("--image", required=True, metavar="IMAGE", help=_("the container image, with torch and the script"))
    parser.add_argument("--api", choices=APIS, default="trainjob", help=_("TrainJob (default) or PyTorchJob"))
    add_job_name(parser, "--name", help=N_("the job's name (default mgtutor)"))
    parser.add_argument("--namespace", default=None, metavar="NS", help=_("the namespace (default: kubectl's)"))
    parser.add_argument("--runtime", default=DEFAULT_RUNTIME, metavar="NAME",
                        help=_("the ClusterTrainingRuntime of a TrainJob (default {runtime})").format(runtime=DEFAULT_RUNTIME))
    parser.add_argument("--shm", default=DEFAULT_SHM, metavar="SIZE",
                        help=_("size of the memory-backed /dev/shm (default {size})").format(size=DEFAULT_SHM))
    add_env_flags(parser, env_is=_("set in every pod:"))
    parser.add_argument("--label", action="append", default=[], metavar="KEY=VALUE", help=_("a label on the job; repeatable"))
    parser.add_argument("--pvc", action="append", default=[], metavar="CLAIM:PATH",
                        help=_("mount a PersistentVolumeClaim at PATH (for checkpoints); repeatable"))
    parser.add_argument("--explain", action="store_true", help=_("also print a walk-through of the job (on stderr)"))
    parser.add_argument("--json", action="store_true", help=_("print the object as JSON instead of commented YAML"))
    add_output_and_target(parser)
    parser.set_defaults(func=main)


def job_from_args(args: argparse.Namespace) -> K8sJob:
    try:
        return K8sJob(target=after_dashdash(args.target), image=args.image, nodes=args.nodes,
                      gpus_per_node=args.gpus_per_node, api=args.api, name=args.name, namespace=args.namespace,
                      runtime=args.runtime, shm=args.shm, nccl_ifname=args.nccl_ifname,
                      env=parse_pairs("--env", args.env, check_env),
                      labels=parse_pairs("--label", args.label, check_label),
                      claims=[parse_claim("--pvc", item) for item in args.pvc])
    except ClusterJobError as exc:
        raise CliError(str(exc)) from None


def main(args: argparse.Namespace) -> int:
    from mgtutor.diagnostics.cluster.k8s import manifest, manifest_yaml  # ruamel.yaml: 50 ms, not for --help

    job = job_from_args(args)
    try:
        text = json.dumps(manifest(job), indent=2) + "\n" if args.json else manifest_yaml(job)
    except ClusterJobError as exc:
        raise CliError(str(exc)) from None
    write_output_file(text, args.output, force=args.force)
    if args.explain:
        sys.stderr.write("\n" + walkthrough(job))
    return 0
