"""The ranks' hook on a GPU (issue 43): a plain NCCL script measured from outside by `mgtutor run`, and no
host-device synchronisation added between log points (torch's sync debug mode counts every one)."""
from __future__ import annotations

import json
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from mgtutor.training.worker.rank_hook import install, uninstall

pytestmark = pytest.mark.gpu

PLAIN_NCCL = '''
import os, torch, torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset
local = int(os.environ["LOCAL_RANK"]); torch.cuda.set_device(local)
dist.init_process_group("nccl")
data = TensorDataset(torch.randn(4096, 256), torch.randint(0, 10, (4096,)))
loader = DataLoader(data, batch_size=64, sampler=DistributedSampler(data))
model = DistributedDataParallel(nn.Sequential(nn.Linear(256, 1024), nn.ReLU(), nn.Linear(1024, 10)).cuda(), device_ids=[local])
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for epoch in range(3):
    for x, y in loader:
        opt.zero_grad()
        nn.functional.cross_entropy(model(x.cuda(non_blocking=True)), y.cuda(non_blocking=True)).backward()
        opt.step()
dist.destroy_process_group()
'''


def test_mgtutor_run_measures_a_plain_nccl_script(tmp_path: Path) -> None:
    script = tmp_path / "plain_nccl.py"
    script.write_text(PLAIN_NCCL)
    nproc = min(torch.cuda.device_count(), 2)
    done = subprocess.run([sys.executable, "-m", "mgtutor.tui", "run", "--nproc", str(nproc), "--backend", "nccl",
                           "--", str(script)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "instrumentation on" in done.stdout + done.stderr
    record = next(line.split(":", 1)[1].strip() for line in (done.stdout + done.stderr).splitlines()
                  if line.startswith("run record:"))
    events = [json.loads(line) for line in (Path(record) / "events.jsonl").read_text().splitlines()]
    steps = [e for e in events if e["type"] == "step"]
    assert {e["rank"] for e in steps} == set(range(nproc))
    for e in steps:
        assert e["origin"] == "hook" and e["step_s"] > 0 and e["samples_per_s"] > 0
        assert e["loss"] > 0 and e["mem_peak_mib"] > 0  # the GPU's peak, the script having started CUDA


class Emitted(list):
    def __call__(self, kind: str, **fields: Any) -> None:
        self.append((kind, fields))


def test_between_log_points_the_hook_adds_no_synchronisation() -> None:
    device = torch.device("cuda", 0)
    data = TensorDataset(torch.randn(40 * 64, 256, device=device), torch.randint(0, 10, (40 * 64,), device=device))
    model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 10)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def steps_that_synchronised() -> list[int]:
        found = []
        torch.cuda.set_sync_debug_mode("warn")
        try:
            for step, (x, y) in enumerate(DataLoader(data, batch_size=64), start=1):
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    opt.zero_grad()
                    nn.functional.cross_entropy(model(x), y).backward()
                    opt.step()
                if any("synchroniz" in str(w.message) for w in caught):
                    found.append(step)
        finally:
            torch.cuda.set_sync_debug_mode("default")
        torch.cuda.synchronize()
        return found

    assert steps_that_synchronised() == []  # the loop itself never waits for the GPU
    emitted = Emitted()

    class Writer:
        emit = emitted

    meter = install(Writer())  # type: ignore[arg-type]
    assert meter is not None
    try:
        synced = steps_that_synchronised()
        meter.finish()
    finally:
        uninstall(meter)
    logged = {fields["step"] for _, fields in emitted}
    assert logged and set(synced) <= logged, (synced, sorted(logged))
    assert all(fields["mem_peak_mib"] > 0 for _, fields in emitted)
