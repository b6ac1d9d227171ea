"""The walk-through `mgtutor k8s --explain` prints beside the manifest: what runs where, what each
part is for, and how to watch the job and diagnose it from the login node."""
from __future__ import annotations

import shlex

from mgtutor.diagnostics.cluster.k8s_job import LAUNCHER, K8sJob

# The label each operator puts on its pods: the selector for `kubectl get pods` and `kubectl logs`.
POD_LABEL = {"trainjob": "jobset.sigs.k8s.io/jobset-name", "pytorchjob": "training.kubeflow.org/job-name"}


def pod_selector(job: K8sJob) -> str:
    return f"{POD_LABEL[job.api]}={job.name}"


def first_host(job: K8sJob) -> str:
    """Node 0's host name, the rendezvous address the operator gives every pod."""
    return f"{job.name}-node-0-0" if job.api == "trainjob" else f"{job.name}-master-0"


def node0_pod(job: K8sJob) -> str:
    """How kubectl names node 0's pod: a JobSet pod's name ends in a random suffix, so by its labels."""
    if job.api == "trainjob":
        return f"-l {pod_selector(job)},batch.kubernetes.io/job-completion-index=0"
    return f"{job.name}-master-0"


def watch_commands(job: K8sJob) -> list[tuple[str, str]]:
    """(command, what it tells) for following the job from a machine with kubectl."""
    ns = f" -n {job.namespace}" if job.namespace else ""
    selector = pod_selector(job)
    kind = "trainjob" if job.api == "trainjob" else "pytorchjob"
    return [
        (f"kubectl get {kind}{ns} {job.name}", "the job's state: Created, Running, Succeeded or Failed"),
        (f"kubectl get pods{ns} -l {selector} -o wide -w",
         f"its {job.nodes} pod(s) and their nodes; Pending for long = no node has {job.gpus_per_node} free GPU(s)"),
        (f"kubectl logs{ns} -f {node0_pod(job)}", "follow node 0 (ranks 0 and up) as it runs"),
        (f"kubectl logs{ns} -l {selector} --tail=-1 > {job.name}.log",
         "every pod's log in one file (without --tail=-1 a selector gives only 10 lines per pod)"),
        (f"mgtutor diagnose {job.name}.log", "the cause of a failure or a hang, the evidence and the fix"),
        (f"kubectl describe pod{ns} {node0_pod(job)}",
         "what no log shows: OOMKilled, Evicted, ImagePullBackOff, a volume that did not mount"),
    ]


def walkthrough(job: K8sJob) -> str:
    world = job.nodes * job.gpus_per_node
    target = shlex.join(job.target)
    if job.api == "trainjob":
        api = (f"A TrainJob for Kubeflow Trainer v2: the ClusterTrainingRuntime {job.runtime} holds the pod "
               f"template; the TrainJob gives the image, the command, numNodes={job.nodes} and "
               f"numProcPerNode={job.gpus_per_node}. Volumes go in through podTemplateOverrides.")
    else:
        api = (f"A PyTorchJob for the Training Operator v1: one Master pod (node 0, the rendezvous host) and "
               f"{job.nodes - 1} Worker pod(s), each a full pod template; the container must be named pytorch.")
    steps = [
        api,
        f"Each of the {job.nodes} pod(s) asks for {job.gpus_per_node} GPU(s) in its limits (nvidia.com/gpu) and runs "
        f"`{shlex.join(LAUNCHER)} {target}`. The operator sets PET_NNODES={job.nodes}, PET_NPROC_PER_NODE="
        f"{job.gpus_per_node}, PET_NODE_RANK (0 to {job.nodes - 1}) and PET_MASTER_ADDR/PORT (host "
        f"{first_host(job)}); torchrun reads them as its flags and starts {job.gpus_per_node} rank(s) per pod: "
        f"RANK = node rank x {job.gpus_per_node} + LOCAL_RANK, WORLD_SIZE = {world}.",
        f"/dev/shm is a memory-backed emptyDir of {job.shm}: the container default of 64 MB kills DataLoader "
        "workers with 'bus error' as soon as batches are large.",
        "The arguments are a list: no shell splits or expands them. Every $ in them "
        "is written $$$$, because Kubernetes expands $(VAR) in command, args and env values and torchrun "
        "fills in ${local_rank}, and each reads $$ as one $ (env values: $$).",
        "A failed pod fails the job: no restart, because a new pod cannot join collectives already under way. "
        "Resume from the last checkpoint with a new job.",
        (f"Checkpoints: {', '.join(c.claim + ' at ' + c.path for c in job.claims)} (persistent volume claims). "
         "Write them from rank 0 only (lesson 06)." if job.claims else
         "Checkpoints: no --pvc was given, so whatever the job writes is lost with its pods. Mount a claim with "
         "--pvc CLAIM:/ckpt and save there from rank 0 only (lesson 06)."),
        ("NCCL bootstraps on " + job.nccl_ifname + " (NCCL_SOCKET_IFNAME)." if job.nccl_ifname else
         "NCCL picks the pod's network interface itself; on pods with several (Multus, SR-IOV) give "
         "--nccl-ifname with the one the nodes share, or the job hangs at its first all-reduce."),
        "NCCL_DEBUG=WARN puts NCCL's reason for a failed connection in the log; torchrun --tee 3 with the "
        "[rank${rank}]: prefix makes every line say which rank wrote it.",
    ]
    lines = ["What this manifest does:"]
    lines += [f"  {n}. {text}" for n, text in enumerate(steps, start=1)]
    lines += ["", "Before applying it:",
              "  kubectl apply --dry-run=server -f FILE   the API server checks it against the installed CRD",
              "", "Watching it from the login node:"]
    lines += [f"  {command}\n      {what}" for command, what in watch_commands(job)]
    return "\n".join(lines) + "\n"
