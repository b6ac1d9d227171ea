"""The walk-through `mgtutor k8s --explain` prints beside the manifest: what runs where, what each
part is for, and how to watch the job and diagnose it from the login node."""
from __future__ import annotations

import shlex

from mgtutor.diagnostics.cluster.k8s_job import LAUNCHER, K8sJob
from mgtutor.training.foundation.i18n import _

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
        (f"kubectl get {kind}{ns} {job.name}", _("the job's state: Created, Running, Succeeded or Failed")),
        (f"kubectl get pods{ns} -l {selector} -o wide -w",
         _("its {nodes} pod(s) and their nodes; Pending for long = no node has {gpus} free GPU(s)").format(
             nodes=job.nodes, gpus=job.gpus_per_node)),
        (f"kubectl logs{ns} -f {node0_pod(job)}", _("follow node 0 (ranks 0 and up) as it runs")),
        (f"kubectl logs{ns} -l {selector} --tail=-1 > {job.name}.log",
         _("every pod's log in one file (without --tail=-1 a selector gives only 10 lines per pod)")),
        (f"mgtutor diagnose {job.name}.log", _("the cause of a failure or a hang, the evidence and the fix")),
        (f"kubectl describe pod{ns} {node0_pod(job)}",
         _("what no log shows: OOMKilled, Evicted, ImagePullBackOff, a volume that did not mount")),
    ]


def walkthrough(job: K8sJob) -> str:
    """What the manifest does, step by step, in the language in force (printed on stderr, never saved)."""
    world = job.nodes * job.gpus_per_node
    target = shlex.join(job.target)
    if job.api == "trainjob":
        api = _("A TrainJob for Kubeflow Trainer v2: the ClusterTrainingRuntime {runtime} holds the pod template; "
                "the TrainJob gives the image, the command, numNodes={nodes} and numProcPerNode={gpus}. Volumes go "
                "in through podTemplateOverrides.").format(runtime=job.runtime, nodes=job.nodes, gpus=job.gpus_per_node)
    else:
        api = _("A PyTorchJob for the Training Operator v1: one Master pod (node 0, the rendezvous host) and "
                "{workers} Worker pod(s), each a full pod template; the container must be named pytorch.").format(
                    workers=job.nodes - 1)
    steps = [
        api,
        _("Each of the {nodes} pod(s) asks for {gpus} GPU(s) in its limits (nvidia.com/gpu) and runs `{command}`. "
          "The operator sets PET_NNODES={nodes}, PET_NPROC_PER_NODE={gpus}, PET_NODE_RANK (0 to {last}) and "
          "PET_MASTER_ADDR/PORT (host {host}); torchrun reads them as its flags and starts {gpus} rank(s) per pod: "
          "RANK = node rank x {gpus} + LOCAL_RANK, WORLD_SIZE = {world}.").format(
              nodes=job.nodes, gpus=job.gpus_per_node, command=f"{shlex.join(LAUNCHER)} {target}",
              last=job.nodes - 1, host=first_host(job), world=world),
        _("/dev/shm is a memory-backed emptyDir of {size}: the container default of 64 MB kills DataLoader "
          "workers with 'bus error' as soon as batches are large.").format(size=job.shm),
        _("The arguments are a list: no shell splits or expands them. Every $ in them is written $$$$, because "
          "Kubernetes expands $(VAR) in command, args and env values and torchrun fills in ${local_rank}, and "
          "each reads $$ as one $ (env values: $$)."),
        _("A failed pod fails the job: no restart, because a new pod cannot join collectives already under way. "
          "Resume from the last checkpoint with a new job."),
        (_("Checkpoints: {claims} (persistent volume claims). Write them from rank 0 only (lesson 06).").format(
            claims=_(", ").join(_("{claim} at {path}").format(claim=c.claim, path=c.path) for c in job.claims))
         if job.claims else
         _("Checkpoints: no --pvc was given, so whatever the job writes is lost with its pods. Mount a claim with "
           "--pvc CLAIM:/ckpt and save there from rank 0 only (lesson 06).")),
        (_("NCCL bootstraps on {interface} (NCCL_SOCKET_IFNAME).").format(interface=job.nccl_ifname)
         if job.nccl_ifname else
         _("NCCL picks the pod's network interface itself; on pods with several (Multus, SR-IOV) give "
           "--nccl-ifname with the one the nodes share, or the job hangs at its first all-reduce.")),
        _("NCCL_DEBUG=WARN puts NCCL's reason for a failed connection in the log; torchrun --tee 3 with the "
          "[rank${rank}]: prefix makes every line say which rank wrote it."),
    ]
    lines = [_("What this manifest does:")]
    lines += [f"  {n}. {text}" for n, text in enumerate(steps, start=1)]
    lines += ["", _("Before applying it:"),
              "  kubectl apply --dry-run=server -f FILE   " + _("the API server checks it against the installed CRD"),
              "", _("Watching it from the login node:")]
    lines += [f"  {command}\n      {what}" for command, what in watch_commands(job)]
    return "\n".join(lines) + "\n"
