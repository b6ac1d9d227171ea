"""Write a real Flight Recorder dump from each rank (gloo), as a hung NCCL job's ranks would on request.

Rank 1 skips the third all_reduce; rank 0 enters it and waits. Each rank then writes torch's own
dump (`_dump_fr_trace`, the bytes a dump-on-timeout writes) to $FR_DIR/rank_<R>.
    torchrun --nproc-per-node 2 fr_dump_gloo.py      (TORCH_FR_BUFFER_SIZE=2000, FR_DIR=...)
"""
import datetime
import os
import time

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import _dump_fr_trace

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=30))
rank = dist.get_rank()
grad = torch.ones(256)
dist.all_reduce(grad)
dist.all_reduce(grad)
if rank != 1:
    work = dist.all_reduce(grad, async_op=True)  # never completes: rank 1 skipped it
time.sleep(1.0)
with open(os.path.join(os.environ["FR_DIR"], f"rank_{rank}"), "wb") as handle:
    handle.write(_dump_fr_trace())
os._exit(0)  # the pending all_reduce would wait for its timeout otherwise
