"""`mgtutor k8s`: the manifests for both APIs parse as Kubernetes reads them, have each API's fields,
ask for the nodes, ranks and GPUs given, replace /dev/shm, pass the script's argv exactly, explain
themselves, and bad values are refused with one line."""
from __future__ import annotations

import argparse
import json
import re
import subprocess

import pytest

from mgtutor.diagnostics.cluster.k8s import K8sError, K8sJob, manifest, manifest_yaml
from mgtutor.diagnostics.cluster.k8s_explain import walkthrough
from mgtutor.diagnostics.cluster.k8s_names import ClaimMount
from mgtutor.diagnostics.cluster.k8s_yaml import load
from mgtutor.tui.commands.cluster import k8s as k8s_command
from mgtutor.tui.errors import CliError
from tests.conftest import mgtutor_argv
from tests.test_k8s_apis import check_pod, check_pytorchjob, check_trainjob, kubelet_expand, script_argv

IMAGE = "nvcr.io/nvidia/pytorch:24.12-py3"
AWKWARD = ["train.py", "--name", "two words", "it's \"quoted\"", "$(date)", "$(NCCL_DEBUG)", "a;rm -rf /", "$$x",
           "`id`", "${local_rank}", "$local_rank", "$", "yes", "on", "0123", "1:30", "--lr=0.1", "", "#not a comment", "- dash", "null", "~", "a: b"]


def job(api: str, nodes: int, gpus: int, **kw) -> K8sJob:
    return K8sJob(target=list(AWKWARD), image=IMAGE, nodes=nodes, gpus_per_node=gpus, api=api, **kw)


def containers(obj: dict) -> list[tuple[dict, int, dict]]:
    """(container as the pod runs it, pods of that shape, pod) for each kind of pod in the job."""
    if obj["kind"] == "TrainJob":
        trainer = obj["spec"]["trainer"]
        [override] = obj["spec"]["podTemplateOverrides"]
        return [(trainer, trainer["numNodes"], override["spec"])]
    replicas = obj["spec"]["pytorchReplicaSpecs"]
    return [(check_pod(r["template"]["spec"], role), r["replicas"], r["template"]["spec"]) for role, r in replicas.items()]


def gpu_limit(obj: dict, container: dict) -> object:
    resources = container["resourcesPerNode"] if obj["kind"] == "TrainJob" else container["resources"]
    return resources["limits"]["nvidia.com/gpu"]


def mounts(obj: dict, container: dict, pod: dict) -> list[dict]:
    if obj["kind"] == "TrainJob":
        [node] = [c for c in pod["containers"] if c["name"] == "node"]
        return node["volumeMounts"]
    return container["volumeMounts"]


@pytest.mark.parametrize("api", ["trainjob", "pytorchjob"])
@pytest.mark.parametrize("nodes", [1, 2, 4])
@pytest.mark.parametrize("gpus", [1, 8])
def test_manifest_asks_for_what_was_given(api: str, nodes: int, gpus: int) -> None:
    obj = load(manifest_yaml(job(api, nodes, gpus)))
    (check_trainjob if api == "trainjob" else check_pytorchjob)(obj)
    kinds = containers(obj)
    assert sum(pods for _, pods, _ in kinds) == nodes
    if api == "trainjob":
        assert obj["spec"]["trainer"]["numProcPerNode"] == gpus
    else:
        assert obj["spec"]["nprocPerNode"] == str(gpus)
        assert list(obj["spec"]["pytorchReplicaSpecs"]) == (["Master", "Worker"] if nodes > 1 else ["Master"])
    for container, _, pod in kinds:
        assert int(gpu_limit(obj, container)) == gpus
        env = {item["name"]: kubelet_expand(item["value"], {}) for item in container["env"]}
        assert container["command"][0] == "torchrun"
        assert script_argv(container["args"], env) == AWKWARD  # exactly, after Kubernetes' and torchrun's expansion
        [shm] = [m for m in mounts(obj, container, pod) if m["mountPath"] == "/dev/shm"]
        [volume] = [v for v in pod["volumes"] if v["name"] == shm["name"]]
        assert volume["emptyDir"]["medium"] == "Memory" and volume["emptyDir"]["sizeLimit"] == "16Gi"


def test_without_escaping_kubernetes_would_have_changed_the_arguments() -> None:
    """The expansion the test applies is real: unescaped, $(NCCL_DEBUG) becomes the variable's value."""
    assert kubelet_expand("$(NCCL_DEBUG)", {"NCCL_DEBUG": "WARN"}) == "WARN"
    assert kubelet_expand("$$(NCCL_DEBUG)", {"NCCL_DEBUG": "WARN"}) == "$(NCCL_DEBUG)"
    assert kubelet_expand("$(date) $x $", {}) == "$(date) $x $"
    assert script_argv(["$$x", "${local_rank}"], {}, local_rank=3) == ["$x", "3"]  # and torchrun's pass after it


def test_options_reach_every_pod() -> None:
    obj = load(manifest_yaml(job("pytorchjob", 3, 4, namespace="ml", nccl_ifname="eth0", env={"NCCL_DEBUG": "INFO"},
                                 labels={"kueue.x-k8s.io/queue-name": "gpu"}, shm="512Mi",
                                 claims=[ClaimMount("ckpt", "/ckpt")])))
    assert obj["metadata"] == {"name": "mgtutor", "namespace": "ml", "labels": {"kueue.x-k8s.io/queue-name": "gpu"}}
    for container, _, pod in containers(obj):
        env = {item["name"]: item["value"] for item in container["env"]}
        assert env["NCCL_SOCKET_IFNAME"] == "eth0" and env["NCCL_DEBUG"] == "INFO"  # --env replaces our default
        assert [item["name"] for item in container["env"]].count("NCCL_DEBUG") == 1
        assert {"name": "claim-0", "mountPath": "/ckpt"} in container["volumeMounts"]
        assert {"name": "claim-0", "persistentVolumeClaim": {"claimName": "ckpt"}} in pod["volumes"]
    trainjob = load(manifest_yaml(job("trainjob", 2, 8, runtime="my-runtime")))
    assert trainjob["spec"]["runtimeRef"] == {"name": "my-runtime", "apiGroup": "trainer.kubeflow.org",
                                              "kind": "ClusterTrainingRuntime"}


def comment_above(text: str, line: str) -> str:
    """The comment lines right above the first line that starts with `line` (indentation aside)."""
    lines = text.splitlines()
    index = next(i for i, ln in enumerate(lines) if ln.strip().startswith(line))
    start = index
    while start > 0 and lines[start - 1].strip().startswith("#"):
        start -= 1
    assert start < index, f"no comment above {line!r}: {lines[index - 1]!r}"
    return " ".join(ln.strip() for ln in lines[start:index])


@pytest.mark.parametrize("api", ["trainjob", "pytorchjob"])
def test_every_non_obvious_field_says_why(api: str) -> None:
    text = manifest_yaml(job(api, 2, 8, nccl_ifname="ib0", claims=[ClaimMount("ckpt", "/ckpt")]))
    assert "Memory" in comment_above(text, "emptyDir:") and "'bus error'" in text
    for field in ("command:", "args:", "limits:", "- name: NCCL_SOCKET_IFNAME", "- name: NCCL_DEBUG",
                  "- name: TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE"):
        comment_above(text, field)
    assert re.search(r"# Checkpoints go here.*rank 0\n\s*# .*\n\s*- name: claim-0\n\s*mountPath: /ckpt\n", text)
    if api == "pytorchjob":
        assert "not restarted" in comment_above(text, "restartPolicy: Never")
        assert "pytorch" in comment_above(text, "containers:")
    else:
        comment_above(text, "numProcPerNode:")
        comment_above(text, "podTemplateOverrides:")


def test_json_is_the_same_object_and_no_comment_changes_the_data() -> None:
    each = job("trainjob", 2, 8, claims=[ClaimMount("ckpt", "/ckpt")])
    assert json.loads(json.dumps(manifest(each))) == load(manifest_yaml(each))


def test_walkthrough_tells_how_to_watch_and_diagnose() -> None:
    text = walkthrough(job("pytorchjob", 2, 8, namespace="ml"))
    assert "kubectl logs -n ml -l training.kubeflow.org/job-name=mgtutor --tail=-1 > mgtutor.log" in text
    assert "mgtutor diagnose mgtutor.log" in text and "WORLD_SIZE = 16" in text
    assert "jobset.sigs.k8s.io/jobset-name=mgtutor" in walkthrough(job("trainjob", 2, 8))


@pytest.mark.parametrize("bad, message", [
    (dict(nodes=0), "--nodes must be at least 1"),
    (dict(gpus_per_node=0), "--gpus-per-node must be at least 1"),
    (dict(name="my_job"), "--name 'my_job'"),
    (dict(name="MyJob"), "--name 'MyJob'"),
    (dict(name="a" * 60), "at most 54 fit"),
    (dict(namespace="Team_A"), "--namespace"),
    (dict(shm="1XB"), "--shm '1XB' is not a Kubernetes quantity"),
    (dict(shm="0Mi"), "is zero"),
    (dict(image="my image"), "--image"),
    (dict(api="slurm"), "--api"),
    (dict(runtime="Torch_Distributed"), "--runtime"),
    (dict(env={"PET_NNODES": "3"}), "the operator sets PET_NNODES"),
    (dict(nccl_ifname="eth0", env={"NCCL_SOCKET_IFNAME": "ib0"}), "given twice"),
    (dict(nccl_ifname="eth0;reboot"), "not an interface list"),
    (dict(labels={"team": "a b"}), "--label"),
    (dict(claims=[ClaimMount("a", "/x"), ClaimMount("b", "/x")]), "same path"),
    (dict(target=[]), "nothing to run"),
])
def test_bad_values_are_refused_with_what_to_give(bad: dict, message: str) -> None:
    fields = dict(target=["t.py"], image=IMAGE) | bad
    with pytest.raises(K8sError, match=re.escape(message)):
        manifest(K8sJob(**fields))


def run_cli(argv: list[str]) -> int:
    """The real `k8s` parser and command, without the rest of the CLI."""
    parser = argparse.ArgumentParser(prog="mgtutor")
    k8s_command.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["k8s", *argv])
    return args.func(args)


@pytest.mark.parametrize("argv, message", [
    (["--env", "=X"], "--env: '' is not an environment variable name"),
    (["--env", "X"], "--env 'X': give KEY=VALUE"),
    (["--env", "A=1", "--env", "A=2"], "--env A is given twice"),
    (["--pvc", "ckpt"], "give CLAIM:PATH"),
    (["--pvc", "Bad_Claim:/ckpt"], "--pvc claim 'Bad_Claim'"),
    (["--pvc", "ckpt:relative"], "absolute directory"),
    (["--label", "a/b/c=d"], "--label"),
    (["--shm", "1XB"], "--shm '1XB'"),
    (["--name", "my_job"], "--name 'my_job'"),
])
def test_cli_refuses_with_one_line(argv: list[str], message: str) -> None:
    with pytest.raises(CliError, match=re.escape(message)) as refused:
        run_cli(["--image", IMAGE, *argv, "--", "t.py"])
    assert refused.value.exit_code == 2 and "\n" not in str(refused.value)


def test_cli_prints_yaml_json_and_the_walkthrough(capsys, tmp_path) -> None:
    assert run_cli(["--image", IMAGE, "--api", "pytorchjob", "--explain", "--", "train.py", "--lr", "0.1"]) == 0
    out, err = capsys.readouterr()
    check_pytorchjob(load(out))
    assert out.startswith("# Written by `mgtutor k8s`") and "What this manifest does" in err
    assert run_cli(["--image", IMAGE, "--json", "--", "-m", "pkg.train"]) == 0
    obj = json.loads(capsys.readouterr().out)
    check_trainjob(obj)
    assert obj["spec"]["trainer"]["args"] == ["-m", "pkg.train"]
    assert run_cli(["--image", IMAGE, "-o", str(tmp_path / "job.yaml"), "--", "t.py"]) == 0
    check_trainjob(load((tmp_path / "job.yaml").read_text()))


@pytest.mark.integration
@pytest.mark.parametrize("argv, message", [
    (["--nodes", "0"], "--nodes must be a whole number of at least 1 (got '0')"),
    (["--name", "My_job"], "--name 'My_job'"),
    (["--shm", "1XB"], "--shm '1XB' is not a Kubernetes quantity"),
    (["--env", "=X"], "--env: '' is not an environment variable name"),
])
def test_installed_cli_exits_2_with_one_line(argv: list[str], message: str) -> None:
    done = subprocess.run(mgtutor_argv("k8s", "--image", IMAGE, *argv, "--", "t.py"), capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2 and done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line.startswith("mgtutor k8s: error: ") and message in line


@pytest.mark.integration
def test_installed_cli_writes_a_manifest() -> None:
    done = subprocess.run(mgtutor_argv("k8s", "--image", IMAGE, "--nodes", "4", "--gpus-per-node", "8", "--",
                                       *AWKWARD), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    obj = load(done.stdout)
    check_trainjob(obj)
    assert script_argv(obj["spec"]["trainer"]["args"], {}) == AWKWARD


def test_the_rank_prefix_torchrun_writes_is_the_one_diagnose_reads() -> None:
    """torchrun renders TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE with string.Template; mgtutor diagnose
    must give the line to that rank."""
    from string import Template

    from mgtutor.diagnostics.failures.logs.logparse import split_prefix

    [template] = [item["value"] for item in load(manifest_yaml(job("trainjob", 2, 8)))["spec"]["trainer"]["env"]
                  if item["name"] == "TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE"]
    prefix = Template(kubelet_expand(template, {})).safe_substitute(rank=11, role_name="default", local_rank=3)
    assert split_prefix(prefix + "RuntimeError: DataLoader worker (pid 7) is killed by signal: Bus error.") == \
        (11, "RuntimeError: DataLoader worker (pid 7) is killed by signal: Bus error.")
