"""A training script in nanoGPT's shape: its settings are module-level variables that configurator.py
overrides from `--name=value` arguments, and it joins a process group when torchrun started it."""
import os

import torch
import torch.nn as nn
from torch.distributed import destroy_process_group, init_process_group
from torch.nn.parallel import DistributedDataParallel as DDP

# -----------------------------------------------------------------------------
# default config values
batch_size = 16
learning_rate = 0.05
max_iters = 20
backend = 'nccl'  # 'nccl', 'gloo', etc.
# -----------------------------------------------------------------------------
exec(open('configurator.py').read())  # overrides from the command line
# -----------------------------------------------------------------------------

ddp = int(os.environ.get('RANK', -1)) != -1
if ddp:
    init_process_group(backend=backend)
    rank = int(os.environ['RANK'])
else:
    rank = 0
torch.manual_seed(1337 + rank)
model = nn.Linear(8, 1)
if ddp:
    model = DDP(model)
optimizer = torch.optim.SGD(model.parameters(), lr=learning_rate)
for step in range(max_iters):
    x = torch.randn(batch_size, 8)
    loss = ((model(x) - x.sum(dim=1, keepdim=True)) ** 2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
if rank == 0:
    print(f"trained {max_iters} steps, loss {loss.item():.4f}")
if ddp:
    destroy_process_group()
