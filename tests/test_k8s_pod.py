"""A generated pod's command, run here as the pod would run it: the container's command and args after
Kubernetes' $-expansion, its env, and the PET_* variables the operator adds. torchrun must start the
ranks with the places the manifest asked for, hand the script its argv exactly, and prefix every
line with the rank, as `mgtutor diagnose` expects."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mgtutor.diagnostics.cluster.k8s import K8sJob, manifest_yaml
from mgtutor.diagnostics.cluster.k8s_yaml import load
from tests.test_k8s import AWKWARD
from tests.test_k8s_apis import kubelet_expand
from mgtutor.training.runs.net.ports import free_port

pytestmark = pytest.mark.integration

SCRIPT = """import json, os, sys
print("ARGV " + json.dumps(sys.argv[1:]), flush=True)
print("PLACE " + json.dumps({k: os.environ[k] for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "GROUP_RANK")}), flush=True)
"""


@pytest.mark.parametrize("api", ["trainjob", "pytorchjob"])
def test_the_pod_command_starts_the_ranks_with_the_exact_argv(tmp_path: Path, api: str) -> None:
    torchrun = Path(sys.executable).parent / "torchrun"
    if not torchrun.exists():
        pytest.skip("no torchrun beside this Python")
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    target = [str(script), *AWKWARD[1:]]
    obj = load(manifest_yaml(K8sJob(target=target, image="img:1", nodes=1, gpus_per_node=2, api=api)))
    container = obj["spec"]["trainer"] if api == "trainjob" else \
        obj["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
    pod_env = {item["name"]: kubelet_expand(item["value"], {}) for item in container["env"]}
    argv = [kubelet_expand(part, pod_env) for part in container["command"] + container["args"]]
    operator = {"PET_NNODES": "1", "PET_NPROC_PER_NODE": "2", "PET_NODE_RANK": "0",
                "PET_MASTER_ADDR": "127.0.0.1", "PET_MASTER_PORT": str(free_port())}
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PET_", "TORCHELASTIC_", "MGTUTOR_"))}
    env.update(pod_env, **operator, PATH=f"{torchrun.parent}{os.pathsep}{env.get('PATH', '')}", OMP_NUM_THREADS="1")
    assert shutil.which(argv[0], path=env["PATH"]) == str(torchrun)
    done = subprocess.run(argv, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=180,
                          start_new_session=True)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [line for line in done.stdout.splitlines() if line.startswith("[rank")]
    places = sorted(json.loads(line.split("PLACE ", 1)[1])["RANK"] for line in lines if "PLACE " in line)
    assert places == ["0", "1"]
    for rank in (0, 1):
        [seen] = [line for line in lines if line.startswith(f"[rank{rank}]:ARGV ")]
        assert json.loads(seen.split("ARGV ", 1)[1]) == AWKWARD[1:]
