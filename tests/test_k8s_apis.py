"""Our own structural check of the two job APIs, from their documented Go types (no cluster):
Kubeflow Trainer v2 TrainJob (trainer.kubeflow.org/v1alpha1, pkg/apis/trainer/v1alpha1/trainjob_types.go)
and Training Operator v1 PyTorchJob (kubeflow.org/v1, pkg/apis/kubeflow.org/v1/pytorch_types.go),
with the core/v1 Pod fields the manifests use. Unknown fields are errors: the API server drops or
refuses them, and a misspelt field is the commonest manifest bug.
"""
from __future__ import annotations

import copy
import re
from string import Template
from typing import Any

import pytest

from mgtutor.diagnostics.cluster.k8s import K8sJob, manifest_yaml
from mgtutor.diagnostics.cluster.k8s_yaml import load

DNS_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
TRAINJOB_SPEC = {"runtimeRef", "initializer", "trainer", "podTemplateOverrides", "suspend", "managedBy",
                 "labels", "annotations", "activeDeadlineSeconds"}
RUNTIME_REF = {"name", "apiGroup", "kind"}
TRAINER = {"image", "command", "args", "env", "numNodes", "resourcesPerNode", "numProcPerNode"}
POD_OVERRIDE = {"targetJobs", "metadata", "spec"}
POD_OVERRIDE_SPEC = {"serviceAccountName", "nodeSelector", "affinity", "tolerations", "volumes", "initContainers",
                     "containers", "schedulingGates", "imagePullSecrets"}
CONTAINER_OVERRIDE = {"name", "env", "volumeMounts"}
PYTORCHJOB_SPEC = {"runPolicy", "elasticPolicy", "pytorchReplicaSpecs", "nprocPerNode"}
RUN_POLICY = {"cleanPodPolicy", "ttlSecondsAfterFinished", "activeDeadlineSeconds", "backoffLimit",
              "schedulingPolicy", "suspend", "managedBy"}
REPLICA_SPEC = {"replicas", "template", "restartPolicy"}
CONTAINER = {"name", "image", "command", "args", "env", "resources", "volumeMounts", "workingDir", "ports"}
VOLUME_SOURCES = {"emptyDir", "persistentVolumeClaim"}


def fields(obj: Any, allowed: set[str], where: str, required: set[str] = frozenset()) -> dict[str, Any]:
    assert isinstance(obj, dict), f"{where} is not a mapping: {obj!r}"
    assert not set(obj) - allowed, f"{where}: unknown fields {sorted(set(obj) - allowed)}"
    assert not required - set(obj), f"{where}: missing {sorted(required - set(obj))}"
    return obj


def strings(value: Any, where: str) -> list[str]:
    assert isinstance(value, list) and all(isinstance(v, str) for v in value), f"{where} must be a list of strings: {value!r}"
    return value


def check_env(env: list[Any], where: str) -> None:
    for i, item in enumerate(env):
        fields(item, {"name", "value", "valueFrom"}, f"{where}[{i}]", {"name"})
        assert isinstance(item.get("value", ""), str), f"{where}[{i}].value must be a string: {item!r}"


def check_volumes(volumes: list[Any], where: str) -> set[str]:
    names = set()
    for i, volume in enumerate(volumes):
        fields(volume, {"name"} | VOLUME_SOURCES, f"{where}[{i}]", {"name"})
        assert len(set(volume) & VOLUME_SOURCES) == 1, f"{where}[{i}] needs exactly one source"
        names.add(volume["name"])
    assert len(names) == len(volumes), f"{where}: volume names repeat"
    return names


def check_mounts(mounts: list[Any], volumes: set[str], where: str) -> None:
    for i, mount in enumerate(mounts):
        fields(mount, {"name", "mountPath", "readOnly", "subPath"}, f"{where}[{i}]", {"name", "mountPath"})
        assert mount["name"] in volumes, f"{where}[{i}] mounts {mount['name']}, which is not a volume"


def check_metadata(obj: dict[str, Any]) -> None:
    meta = fields(obj.get("metadata"), {"name", "namespace", "labels", "annotations"}, "metadata", {"name"})
    assert DNS_1035.match(meta["name"]) and len(meta["name"]) <= 63


def check_trainjob(obj: dict[str, Any]) -> None:
    fields(obj, {"apiVersion", "kind", "metadata", "spec"}, "TrainJob", {"apiVersion", "kind", "metadata", "spec"})
    assert (obj["apiVersion"], obj["kind"]) == ("trainer.kubeflow.org/v1alpha1", "TrainJob")
    check_metadata(obj)
    spec = fields(obj["spec"], TRAINJOB_SPEC, "spec", {"runtimeRef"})
    fields(spec["runtimeRef"], RUNTIME_REF, "spec.runtimeRef", {"name"})
    trainer = fields(spec.get("trainer", {}), TRAINER, "spec.trainer")
    strings(trainer.get("command", []), "trainer.command")
    strings(trainer.get("args", []), "trainer.args")
    check_env(trainer.get("env", []), "trainer.env")
    for key in ("numNodes", "numProcPerNode"):
        assert isinstance(trainer.get(key, 1), int) and trainer.get(key, 1) >= 1, f"trainer.{key}"
    fields(trainer.get("resourcesPerNode", {}), {"limits", "requests", "claims"}, "trainer.resourcesPerNode")
    for i, override in enumerate(spec.get("podTemplateOverrides", [])):
        fields(override, POD_OVERRIDE, f"podTemplateOverrides[{i}]", {"targetJobs"})
        assert override["targetJobs"] and all(fields(t, {"name"}, "targetJobs[]", {"name"}) for t in override["targetJobs"])
        pod = fields(override.get("spec", {}), POD_OVERRIDE_SPEC, f"podTemplateOverrides[{i}].spec")
        volumes = check_volumes(pod.get("volumes", []), "override volumes")
        for container in pod.get("containers", []):
            fields(container, CONTAINER_OVERRIDE, "override container", {"name"})
            check_mounts(container.get("volumeMounts", []), volumes, "override volumeMounts")


def check_pod(pod: dict[str, Any], where: str) -> dict[str, Any]:
    """The one container named pytorch, checked; returned."""
    fields(pod, {"containers", "volumes", "nodeSelector", "tolerations", "affinity", "serviceAccountName"}, where,
           {"containers"})
    volumes = check_volumes(pod.get("volumes", []), f"{where}.volumes")
    named = [c for c in pod["containers"] if isinstance(c, dict) and c.get("name") == "pytorch"]
    assert len(named) == 1, f"{where}: the operator needs exactly one container named pytorch"
    container = fields(named[0], CONTAINER, f"{where}.containers[pytorch]", {"name", "image"})
    strings(container.get("command", []), "command")
    strings(container.get("args", []), "args")
    check_env(container.get("env", []), f"{where}.env")
    check_mounts(container.get("volumeMounts", []), volumes, f"{where}.volumeMounts")
    return container


def check_pytorchjob(obj: dict[str, Any]) -> None:
    fields(obj, {"apiVersion", "kind", "metadata", "spec"}, "PyTorchJob", {"apiVersion", "kind", "metadata", "spec"})
    assert (obj["apiVersion"], obj["kind"]) == ("kubeflow.org/v1", "PyTorchJob")
    check_metadata(obj)
    spec = fields(obj["spec"], PYTORCHJOB_SPEC, "spec", {"pytorchReplicaSpecs"})
    assert isinstance(spec.get("nprocPerNode", ""), str), "nprocPerNode is a string in kubeflow.org/v1"
    policy = fields(spec.get("runPolicy", {}), RUN_POLICY, "spec.runPolicy")
    assert policy.get("cleanPodPolicy", "None") in ("All", "Running", "None")
    replicas = fields(spec["pytorchReplicaSpecs"], {"Master", "Worker"}, "pytorchReplicaSpecs")
    assert replicas.get("Master", {}).get("replicas", 1) == 1, "there is one Master"
    for role, replica in replicas.items():
        fields(replica, REPLICA_SPEC, role, {"replicas", "template"})
        assert replica.get("restartPolicy", "OnFailure") in ("Always", "OnFailure", "Never", "ExitCode")
        fields(replica["template"], {"metadata", "spec"}, f"{role}.template", {"spec"})
        check_pod(replica["template"]["spec"], f"{role}.template.spec")


def script_argv(args: list[str], env: dict[str, str], local_rank: int = 0) -> list[str]:
    """What the script gets for the container's args: Kubernetes' expansion, then torchrun's
    string.Template pass over them (torch/distributed/elastic/utils/api.py: macros.substitute)."""
    return [Template(kubelet_expand(arg, env)).safe_substitute(local_rank=str(local_rank)) for arg in args]


def kubelet_expand(text: str, env: dict[str, str]) -> str:
    """What the container gets for a command, args or env value: Kubernetes replaces $(NAME) by
    NAME's value when NAME is one of the container's variables, and $$ by $ (expansion.go)."""
    out, i = [], 0
    while i < len(text):
        if text[i] == "$" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt == "$":
                out.append("$")
                i += 2
                continue
            if nxt == "(":
                close = text.find(")", i + 2)
                if close != -1:
                    name = text[i + 2:close]
                    out.append(env[name] if name in env else text[i:close + 1])
                    i = close + 1
                    continue
        out.append(text[i])
        i += 1
    return "".join(out)


def sample(api: str) -> dict[str, Any]:
    return load(manifest_yaml(K8sJob(target=["t.py", "--x"], image="img:1", nodes=2, gpus_per_node=2, api=api)))


def unquoted_yes(obj: dict[str, Any]) -> None:
    """What a YAML 1.1 reader makes of an argument `yes` written without quotes."""
    container = obj["spec"]["trainer"] if obj["kind"] == "TrainJob" else \
        obj["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
    container["args"].append(True)


BREAKAGES = {
    "a misspelt field": lambda o: o["spec"].__setitem__("numNode", 2),
    "an argument read as a bool": unquoted_yes,
    "a mount of no volume": lambda o: (o["spec"]["podTemplateOverrides"][0]["spec"]["containers"][0] if o["kind"] == "TrainJob"
                                       else o["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
                                       )["volumeMounts"].append({"name": "nope", "mountPath": "/x"}),
    "a name with _": lambda o: o["metadata"].__setitem__("name", "my_job"),
}


@pytest.mark.parametrize("api", ["trainjob", "pytorchjob"])
@pytest.mark.parametrize("breakage", BREAKAGES, ids=list(BREAKAGES))
def test_the_check_passes_ours_and_catches_broken_manifests(api: str, breakage: str) -> None:
    check = check_trainjob if api == "trainjob" else check_pytorchjob
    good = sample(api)
    check(good)
    broken = copy.deepcopy(good)
    BREAKAGES[breakage](broken)
    with pytest.raises(AssertionError):
        check(broken)


def test_the_pytorchjob_check_wants_the_container_named_pytorch() -> None:
    obj = sample("pytorchjob")
    obj["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["name"] = "trainer"
    with pytest.raises(AssertionError, match="named pytorch"):
        check_pytorchjob(obj)
