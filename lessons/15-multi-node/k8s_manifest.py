"""Lesson 15, Kubernetes: write this lesson's job as a TrainJob and as a PyTorchJob, read them, and
check what they ask for. No cluster is needed: the check is on the object, not on a cluster.

    python k8s_manifest.py            (needs the mgtutor command; kubectl is optional)

With kubectl on PATH, each file also goes through `kubectl apply --dry-run=client`; without a
cluster to ask which kinds exist, kubectl says so, and that is reported, not failed.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
from string import Template

NODES, GPUS = 2, 8
IMAGE = "nvcr.io/nvidia/pytorch:24.12-py3"
# Awkward on purpose: a space, quotes, a $(…) Kubernetes would expand and a ; a shell would obey.
ARGV = ["example.py", "--note", "it's \"two words\"; $(hostname)"]


def report(**fields):
    print("REPORT " + json.dumps(fields), flush=True)


def mgtutor_k8s(api, *extra):
    argv = [sys.executable, "-m", "mgtutor.tui", "k8s", "--api", api, "--nodes", str(NODES), "--gpus-per-node",
            str(GPUS), "--image", IMAGE, "--name", "lesson15", "--pvc", "checkpoints:/ckpt", *extra, "--", *ARGV]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise SystemExit(f"mgtutor k8s failed ({done.returncode}): {done.stderr.strip()}")
    return done.stdout


def unescape(text):
    """What the script gets for an argument: Kubernetes reads $$ in args as one $ (and expands
    $(VAR)), then torchrun does the same with string.Template (and fills in ${local_rank})."""
    return Template(text.replace("$$", "$")).safe_substitute(local_rank="0")


def pods(obj):
    """(container, how many pods run it, pod spec with the volumes) for each kind of pod."""
    if obj["kind"] == "TrainJob":
        trainer = obj["spec"]["trainer"]
        override = obj["spec"]["podTemplateOverrides"][0]["spec"]
        node = [c for c in override["containers"] if c["name"] == "node"][0]
        return [(dict(trainer, volumeMounts=node["volumeMounts"], resources=trainer["resourcesPerNode"]),
                 trainer["numNodes"], override)]
    found = []
    for spec in obj["spec"]["pytorchReplicaSpecs"].values():
        pod = spec["template"]["spec"]
        container = [c for c in pod["containers"] if c["name"] == "pytorch"][0]  # the operator's name for it
        found.append((container, spec["replicas"], pod))
    return found


def problems(obj):
    """What the object gets wrong about this job, in words; [] when it is right."""
    wrong = []
    kinds = pods(obj)
    if sum(count for _, count, _ in kinds) != NODES:
        wrong.append(f"{sum(count for _, count, _ in kinds)} pods, not {NODES}")
    per_node = obj["spec"]["trainer"]["numProcPerNode"] if obj["kind"] == "TrainJob" else int(obj["spec"]["nprocPerNode"])
    if per_node != GPUS:
        wrong.append(f"{per_node} ranks per pod, not {GPUS}")
    for container, _, pod in kinds:
        if int(container["resources"]["limits"].get("nvidia.com/gpu", 0)) != GPUS:
            wrong.append("the GPU limit is not the ranks per pod")
        if [unescape(a) for a in container["args"]] != ARGV:
            wrong.append(f"the arguments changed: {container['args']}")
        shm = [m["name"] for m in container["volumeMounts"] if m["mountPath"] == "/dev/shm"]
        memory = [v for v in pod["volumes"] if v["name"] in shm and v.get("emptyDir", {}).get("medium") == "Memory"]
        if not memory:
            wrong.append("no memory-backed volume over /dev/shm")
        if not any(m["mountPath"] == "/ckpt" for m in container["volumeMounts"]):
            wrong.append("the checkpoint claim is not mounted")
    return wrong


def dry_run(path):
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        return "not installed: skipped"
    done = subprocess.run([kubectl, "apply", "--dry-run=client", "--request-timeout=10s", "-f", path],
                          capture_output=True, text=True, timeout=60)
    if done.returncode == 0:
        return "accepted: " + done.stdout.strip()
    said = done.stderr.strip()
    if "no matches for kind" in said:
        return "the cluster has no such kind: its operator (Trainer v2 or Training Operator v1) is not installed"
    if "connect" in said or "dial tcp" in said:
        return "no cluster reachable: even a client dry run asks the API server which kinds exist"
    return "refused: " + (said.splitlines() or ["no output"])[-1][:200]


def main():
    with tempfile.TemporaryDirectory() as folder:
        results = {}
        for api in ("trainjob", "pytorchjob"):
            path = os.path.join(folder, f"lesson15-{api}.yaml")
            mgtutor_k8s(api, "-o", path)
            with open(path) as f:
                text = f.read()
            print(f"----- {api}: {path} -----\n{text}", flush=True)  # read it: each comment says why
            wrong = problems(json.loads(mgtutor_k8s(api, "--json")))
            results[api] = dry_run(path)
            print(f"kubectl apply --dry-run=client: {results[api]}", flush=True)
            report(**{f"{api}_ok": not wrong, f"{api}_problems": wrong})
        report(kubectl=results["trainjob"])


if __name__ == "__main__":
    main()
