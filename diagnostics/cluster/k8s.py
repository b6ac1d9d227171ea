"""A Kubernetes manifest for a multi-node torchrun job, every non-obvious field explained.

    text = manifest_yaml(K8sJob(target=["train.py", "--epochs", "3"], image="…", nodes=2, gpus_per_node=8))

`TrainJob` (Kubeflow Trainer v2) or `PyTorchJob` (Training Operator v1): both start one pod per
node and torchrun in each; the pieces they share (command, environment, GPU limits, the /dev/shm
volume, checkpoint claims) are written once here, each with the reason above it.
"""
from __future__ import annotations

from ruamel.yaml.comments import CommentedMap

from mgtutor.diagnostics.cluster.k8s_explain import pod_selector
from mgtutor.diagnostics.cluster.common import torchrun_literal
from mgtutor.diagnostics.cluster.k8s_job import LAUNCHER, SHM_PATH, K8sError, K8sJob, env_vars, k8s_literal
from mgtutor.diagnostics.cluster.k8s_yaml import Block, dump

__all__ = ["K8sError", "K8sJob", "manifest", "manifest_yaml"]

GPU = "nvidia.com/gpu"
IMAGE_WHY = ("Its torch must work with the nodes' driver: a CUDA 12.x build needs a driver for 12.x\n"
             "(nvidia-smi on a node shows the highest CUDA it supports).")
GPU_WHY = ("GPUs are an extended resource: asked for in limits (requests then equal them). The device\n"
           "plugin gives the container exactly these GPUs; without the limit it gets none, or on\n"
           "some nodes all of them, shared with whatever else runs there.")
COMMAND_WHY = ("torchrun finds its place in the job in the PET_* variables the operator sets (nodes, node\n"
               "rank, rendezvous host and port), so it needs no flags here. --tee 3: every rank's output\n"
               "also reaches the pod's log, prefixed with the rank.")
SHM_WHY = ("A container's /dev/shm is 64 MB unless a volume replaces it. DataLoader workers hand batches\n"
           "to the rank through it and die with 'bus error' or 'No space left on device' when it is full.\n"
           "medium: Memory makes it RAM-backed; what is stored in it counts against the pod's memory.")
ARGS_WHY = ("The script and its arguments, one list item each: no shell splits or expands them. A $ is\n"
            "written $$$$: Kubernetes and then torchrun (for ${local_rank}) each read $$ as $.")


def add_command(container: Block, job: K8sJob, explain: bool = True) -> None:
    container.set("command", list(LAUNCHER), COMMAND_WHY if explain else None)
    container.set("args", [k8s_literal(torchrun_literal(part)) for part in job.target], ARGS_WHY if explain else None)


def add_env(container: Block, job: K8sJob, explain: bool = True, operator_sets_unbuffered: bool = False) -> None:
    for name, value, why in env_vars(job):
        if operator_sets_unbuffered and name == "PYTHONUNBUFFERED":
            continue
        container.item("env", None, why if explain else None).set("name", name).set("value", k8s_literal(value))


def add_volumes(pod: Block, job: K8sJob, explain: bool = True) -> None:
    pod.item("volumes").set("name", "dshm").block("emptyDir", SHM_WHY if explain else None).set("medium", "Memory").set("sizeLimit", job.shm)
    for index, claim in enumerate(job.claims):
        pod.item("volumes").set("name", f"claim-{index}").block("persistentVolumeClaim").set("claimName", claim.claim)


def add_mounts(container: Block, job: K8sJob, explain: bool = True) -> None:
    container.item("volumeMounts", "The memory-backed volume over /dev/shm (see volumes)." if explain else None).set(
        "name", "dshm").set("mountPath", SHM_PATH)
    for index, claim in enumerate(job.claims):
        why = ("Checkpoints go here: the container's own files are gone with its pod. Save from rank 0\n"
               "only; for every node to read them back, the claim must be ReadWriteMany.")
        container.item("volumeMounts", None, why if index == 0 and explain else None).set(
            "name", f"claim-{index}").set("mountPath", claim.path)


def add_metadata(doc: Block, job: K8sJob) -> None:
    meta = doc.block("metadata")
    meta.set("name", job.name, "Pods and Services are named after it, so it must be a DNS label.")
    if job.namespace:
        meta.set("namespace", job.namespace)
    if job.labels:
        labels = meta.block("labels", "Given with --label (a Kueue queue is chosen with kueue.x-k8s.io/queue-name).")
        for key, value in job.labels.items():
            labels.set(key, value)


def header(job: K8sJob, kind: str, needs: str) -> str:
    lines = [
        f"Written by `mgtutor k8s`: {kind} {job.name}, {job.nodes} node(s) x {job.gpus_per_node} GPU(s): one pod "
        "per node, torchrun in each, one rank per GPU.",
        needs,
        "Check: kubectl apply --dry-run=server -f FILE    Run: kubectl apply -f FILE",
        f"Logs: kubectl logs -l {pod_selector(job)} --tail=-1 > {job.name}.log; mgtutor diagnose {job.name}.log",
        "Every $ in env values is written $$ (Kubernetes expands $(VAR) there), in args $$$$ (torchrun does too).",
    ]
    if not job.claims:
        lines.append("No --pvc: nothing the job writes outlives its pods; give --pvc CLAIM:/ckpt for checkpoints.")
    return "\n".join(lines)


def trainjob(job: K8sJob) -> CommentedMap:
    doc = Block()
    doc.header(header(job, "TrainJob", f"Needs Kubeflow Trainer v2 and the ClusterTrainingRuntime {job.runtime} "
                                       "(kubectl get clustertrainingruntimes)."))
    doc.set("apiVersion", "trainer.kubeflow.org/v1alpha1").set("kind", "TrainJob")
    add_metadata(doc, job)
    spec = doc.block("spec")
    spec.block("runtimeRef", "The cluster's template for the pods; torch-distributed runs torchrun with PET_* set.").set(
        "name", job.runtime).set("apiGroup", "trainer.kubeflow.org").set(
        "kind", "ClusterTrainingRuntime", "A namespaced runtime would be kind TrainingRuntime, in the job's namespace.")
    trainer = spec.block("trainer")
    trainer.set("image", job.image, IMAGE_WHY)
    add_command(trainer, job)
    add_env(trainer, job)
    trainer.set("numNodes", job.nodes, f"One pod per node: {job.name}-node-0-0 … ; the first hosts the rendezvous.")
    trainer.set("numProcPerNode", job.gpus_per_node, "Ranks torchrun starts in each pod: one per GPU (LOCAL_RANK picks it).")
    trainer.block("resourcesPerNode").block("limits", GPU_WHY).set(GPU, job.gpus_per_node)
    override = spec.item(
        "podTemplateOverrides",
        "Volumes are not trainer fields: they are added to the runtime's pod template, for its job\n"
        "'node' and container 'node'. (Trainer releases that refuse this field replaced it with\n"
        "runtimePatches.) No restart policy here: the runtime's JobSet fails the job when a pod fails.")
    override.item("targetJobs").set("name", "node")
    pod = override.block("spec")
    add_volumes(pod, job)
    container = pod.item("containers")
    container.set("name", "node")
    add_mounts(container, job)
    return doc.map


def pytorch_pod(job: K8sJob, explain: bool) -> CommentedMap:
    pod = Block(10)  # the keys of pytorchReplicaSpecs.<role>.template.spec sit in column 10
    container = pod.item("containers", "The operator finds the training container by its name, pytorch." if explain else None)
    container.set("name", "pytorch")
    container.set("image", job.image, IMAGE_WHY if explain else None)
    add_command(container, job, explain)
    add_env(container, job, explain, operator_sets_unbuffered=True)
    container.block("resources").block("limits", GPU_WHY if explain else None).set(GPU, job.gpus_per_node)
    add_mounts(container, job, explain)
    add_volumes(pod, job, explain)
    return pod.map


def pytorchjob(job: K8sJob) -> CommentedMap:
    doc = Block()
    doc.header(header(job, "PyTorchJob", "Needs the Kubeflow Training Operator v1 (kubectl get crd pytorchjobs.kubeflow.org)."))
    doc.set("apiVersion", "kubeflow.org/v1").set("kind", "PyTorchJob")
    add_metadata(doc, job)
    spec = doc.block("spec")
    spec.set("nprocPerNode", str(job.gpus_per_node),
             "Ranks torchrun starts in each pod, one per GPU (a string: auto, cpu and gpu are allowed too).")
    spec.block("runPolicy", "Keep the pods after the end, so `kubectl logs` still has every rank's output;\n"
                            f"`kubectl delete pytorchjob {job.name}` removes them.").set("cleanPodPolicy", "None")
    replicas = spec.block(
        "pytorchReplicaSpecs",
        f"Master is node 0 and hosts the rendezvous (Service {job.name}-master-0); each Worker is one more\n"
        "node. No elasticPolicy: the number of nodes is fixed, as torchrun's --nnodes N.")
    roles = [("Master", 1)] + ([("Worker", job.nodes - 1)] if job.nodes > 1 else [])
    for role, count in roles:
        master = role == "Master"
        spec_of_role = replicas.block(role, None if master else "The same pod as Master's.")
        spec_of_role.set("replicas", count)
        spec_of_role.set("restartPolicy", "Never",
                         "A failed pod is not restarted: the other ranks wait in a collective it cannot rejoin.\n"
                         "The job fails and says so; resume from the last checkpoint with a new job." if master else None)
        spec_of_role.block("template").set("spec", pytorch_pod(job, explain=master))
    return doc.map


def manifest(job: K8sJob) -> CommentedMap:
    """The object with its comments attached; K8sError on bad input."""
    job.check()
    return trainjob(job) if job.api == "trainjob" else pytorchjob(job)


def manifest_yaml(job: K8sJob) -> str:
    return dump(manifest(job))
