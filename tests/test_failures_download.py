"""A DDP script that downloads CIFAR-10 on every rank with no way out to the internet, run for real on one rank:
the failure, its traceback and the diagnosis are each rank's own (every rank fails alike, and each imports
torchvision, 2 CPU-s apiece), so a second rank would only repeat them. The rank starts through the stand-in
torchrun (it is the real script on real torch, gloo and torchvision; torchrun adds nothing the test reads), and
`mgtutor diagnose` goes through the CLI's main in process.

The data set's URL is pointed at a host under `.invalid` (a top-level domain that never resolves,
RFC 2606), so the download fails exactly as it does without network — socket.gaierror "Name or
service not known" inside torchvision's download, URLError on every rank — on any machine, also
one that does have internet, and nothing is downloaded.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.userscript_cli import in_process, mgtutor

pytestmark = pytest.mark.integration  # starts the stand-in torchrun and its rank

SCRIPT = """\
import os, socket, tempfile
import torch.distributed as dist
import torchvision

socket.setdefaulttimeout(20)
torchvision.datasets.CIFAR10.url = "https://cifar-10.data.invalid/cifar-10-python.tar.gz"
dist.init_process_group("gloo")
train = torchvision.datasets.CIFAR10(root=tempfile.mkdtemp(), train=True, download=True)
print(len(train))
dist.destroy_process_group()
"""


def test_download_without_network_is_diagnosed_as_such(write_script, capsys, standin_torchrun) -> None:
    run = mgtutor("run", "--nproc", "1", "--", str(write_script("train_cifar.py", SCRIPT)))
    assert run.returncode != 0
    assert "URLError" in run.stdout + run.stderr  # the real failure happened
    record = next(line.removeprefix("run record: ") for line in run.stdout.splitlines() if line.startswith("run record: "))
    code, diagnosis = in_process(capsys, "diagnose", Path(record).name, "--json")
    assert code == 0
    findings = json.loads(diagnosis)["findings"]
    assert findings[0]["kind"] == "dataset_download_failed", [f["kind"] for f in findings]
    assert "child_failed" not in [f["kind"] for f in findings]
    assert "dist.barrier()" in findings[0]["fix"] and "root=" in findings[0]["fix"]
    assert any("URLError" in ev["text"] for ev in findings[0]["evidence"])
