"""The Kubernetes job as given on the command line, checked against Kubernetes' rules before any YAML is written.

Two APIs launch torchrun on Kubernetes: Kubeflow Trainer v2's `TrainJob`
(trainer.kubeflow.org/v1alpha1, on a ClusterTrainingRuntime such as torch-distributed) and
Training Operator v1's `PyTorchJob` (kubeflow.org/v1). Both start one pod per node and give
torchrun its place through PET_* variables (PET_NNODES, PET_NPROC_PER_NODE, PET_NODE_RANK,
PET_MASTER_ADDR, PET_MASTER_PORT, read by torchrun as its flags), so the command is plain
`torchrun SCRIPT ARGS`. Pure data: no cluster is needed to write the manifest, only to run it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from mgtutor.training.foundation.i18n import _

from mgtutor.diagnostics.cluster.common import ClusterJobError, check_counts, check_ifname, check_target
from mgtutor.diagnostics.cluster.k8s_names import (
    ClaimMount, check_label, check_rfc1035_label, check_rfc1123_label, check_subdomain, quantity_bytes,
)

APIS = ("trainjob", "pytorchjob")
DEFAULT_RUNTIME = "torch-distributed"
DEFAULT_SHM = "16Gi"
SHM_PATH = "/dev/shm"
LAUNCHER = ["torchrun", "--tee", "3"]
# Set by the operator (or by torchrun for the ranks): a second value would fight the first.
RESERVED_ENV = {"PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT",
                "MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE"}


class K8sError(ClusterJobError):
    """Bad input for the manifest, with what to give instead."""


@dataclass
class K8sJob:
    target: list[str]  # SCRIPT ARGS… or -m MODULE ARGS…
    image: str
    nodes: int = 2
    gpus_per_node: int = 1
    api: str = "trainjob"
    name: str = "mgtutor"
    namespace: str | None = None
    runtime: str = DEFAULT_RUNTIME
    shm: str = DEFAULT_SHM
    nccl_ifname: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    claims: list[ClaimMount] = field(default_factory=list)

    def pod_name_suffix(self) -> str:
        """The longest suffix the operator adds to the job's name for a pod's hostname (at most 63 in all)."""
        if self.api == "pytorchjob":
            return f"-worker-{self.nodes - 2}" if self.nodes > 1 else "-master-0"
        return f"-node-0-{self.nodes - 1}"  # JobSet: <job>-<replicated job>-<job index>-<pod index>

    def check(self) -> None:
        try:
            check_target(self.target, "k8s")
            check_counts(self.nodes, self.gpus_per_node)
            if self.api not in APIS:
                raise ClusterJobError(_("--api {api!r}: give trainjob (Kubeflow Trainer v2) or pytorchjob (Training "
                                        "Operator v1)").format(api=self.api))
            if not self.image or any(c.isspace() for c in self.image):
                raise ClusterJobError(_("--image {image!r}: give an image reference without spaces, e.g. "
                                        "nvcr.io/nvidia/pytorch:24.12-py3").format(image=self.image))
            check_rfc1035_label("--name", self.name, room=63 - len(self.pod_name_suffix()))
            if self.namespace is not None:
                check_rfc1123_label("--namespace", self.namespace)
            check_subdomain("--runtime", self.runtime)
            quantity_bytes("--shm", self.shm)
            check_ifname("--nccl-ifname", self.nccl_ifname)
            for key in self.env:
                if key in RESERVED_ENV:
                    raise ClusterJobError(_("--env {key}: the operator sets {key} in every pod; torchrun's place in "
                                            "the job comes from --nodes and --gpus-per-node").format(key=key))
            if self.nccl_ifname and "NCCL_SOCKET_IFNAME" in self.env:
                raise ClusterJobError(_("NCCL_SOCKET_IFNAME is given twice: by --nccl-ifname and by --env"))
            for key, value in self.labels.items():
                check_label("--label", key, value)
            paths = [claim.path for claim in self.claims]
            if len(set(paths)) != len(paths):
                raise ClusterJobError(_("--pvc: two claims are mounted at the same path"))
        except ClusterJobError as exc:
            raise K8sError(str(exc)) from None


def k8s_literal(text: str) -> str:
    """Kubernetes expands $(VAR) in command, args and env values, and reads $$ as one $: every $
    is doubled so the container gets the text exactly as given."""
    return text.replace("$", "$$")


def env_vars(job: K8sJob) -> list[tuple[str, str, str | None]]:
    """(name, value, why) for the training container, ours first; --env may replace our defaults."""
    ours: list[tuple[str, str, str | None]] = [
        ("PYTHONUNBUFFERED", "1", "Rank output reaches `kubectl logs` line by line, not in blocks at exit."),
        ("TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE", "[rank${rank}]:",
         "With torchrun's --tee, each line is prefixed with its global rank, so `mgtutor diagnose` can\n"
         "tell the ranks apart in one pod's log (${rank} is torchrun's, not Kubernetes')."),
        ("NCCL_DEBUG", "WARN", "NCCL says why a connection failed (which interface, which peer) instead of\n"
                               "only a timeout. INFO also prints the topology it chose."),
    ]
    if job.nccl_ifname:
        ours.append(("NCCL_SOCKET_IFNAME", job.nccl_ifname,
                     "The interface NCCL bootstraps on. Pods with several (Multus, SR-IOV, a service mesh)\n"
                     "need the one the nodes share; a wrong pick hangs at the first collective."))
    given = {name: value for name, value in job.env.items()}
    merged = [(name, given.pop(name, value), why) for name, value, why in ours]
    merged += [(name, value, "Given with --env.") for name, value in given.items()]
    return merged
