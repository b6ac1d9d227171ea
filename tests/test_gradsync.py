"""gradsync (the by-hand DDP inside --cuda-graphs) against DDP itself, on 2 real gloo ranks.

The averaging, the buckets and the hooks are the same code on a CPU; only the side stream is
GPU-only, and the gpu suite runs that (tests/gpu/test_train_gpu.py, --cuda-graphs). The ranks are started
by the torch-free stand-in torchrun (the `standin_torchrun` fixture): what is compared is torch's DDP and
gradsync inside them, not torchrun, which the trainer's tests start for real.
"""
from __future__ import annotations

import json

import pytest
from mgtutor.training.runs.launch.launcher import LaunchSpec, launch

pytestmark = pytest.mark.integration  # starts processes

COMPARE = r'''
import json, os, sys
import torch, torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from mgtutor.training.worker.trainer.gradsync import BucketAverager, broadcast_from_rank0
from mgtutor.training.worker.trainer.models import WithUnusedHead, build_model

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(rank)  # different weights per rank: the broadcast must make them equal
ours, theirs = WithUnusedHead(build_model("tinycnn")), WithUnusedHead(build_model("tinycnn"))
theirs.load_state_dict(ours.state_dict())
# channels_last, as on a GPU: the gradients are averaged in their memory order and keep their layout
ours, theirs = ours.to(memory_format=torch.channels_last), theirs.to(memory_format=torch.channels_last)
ddp = DDP(theirs, find_unused_parameters=True)  # DDP broadcasts rank 0's weights too
params = list(ours.parameters())
broadcast_from_rank0(params + list(ours.buffers()))
averager = BucketAverager(params, torch.device("cpu"), bucket_bytes=1024)  # several buckets
torch.manual_seed(100 + rank)  # each rank its own data
x, y = torch.randn(8, 3, 32, 32).contiguous(memory_format=torch.channels_last), torch.randint(0, 10, (8,))
averager.start()
F.cross_entropy(ours(x), y).backward()
averager.finish()
F.cross_entropy(ddp(x), y).backward()
diff = max((a.grad - b.grad).abs().max().item() for a, b in zip(ours.body.parameters(), theirs.body.parameters()))
same_weights = all(torch.equal(a, b) for a, b in zip(ours.parameters(), theirs.parameters()))
print(json.dumps({"rank": rank, "buckets": len(averager.buckets), "max_grad_diff": diff,
                  "same_weights_as_ddp": same_weights, "unused_grad": ours.unused_head.weight.grad is None,
                  "layout_kept": all(p.grad.stride() == p.stride() for p in ours.body.parameters()),
                  "channels_last_params": sum(p.dim() == 4 and not p.is_contiguous() for p in ours.parameters()),
                  "grad_sum": sum(p.grad.sum().item() for p in ours.body.parameters())}), flush=True)
dist.destroy_process_group()
'''


def test_bucketed_average_matches_ddp_gradients(write_script, standin_torchrun) -> None:
    run = launch(LaunchSpec(target=[str(write_script("compare.py", COMPARE))], nproc=2, backend="gloo",
                            label="gradsync"))
    result = run.wait(timeout=180).to_json()
    logs = {r: p.read_text() for r, s, p in run.record.rank_logs() if s == "stdout"}
    assert result["status"] == "finished", {r: p.read_text()[-2000:] for r, _s, p in run.record.rank_logs()}
    reports = [json.loads(logs[r].strip().splitlines()[-1]) for r in (0, 1)]
    for report in reports:
        assert report["buckets"] > 2
        assert report["same_weights_as_ddp"]
        assert report["max_grad_diff"] < 1e-6, report
        assert report["layout_kept"] and report["channels_last_params"] > 0, report
        assert report["unused_grad"]  # a parameter forward never used keeps no gradient, as under DDP
    assert abs(reports[0]["grad_sum"] - reports[1]["grad_sum"]) < 1e-6  # both ranks hold the average
