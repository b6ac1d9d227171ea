"""An nanoGPT-like script: DDP optional, a master_process flag, no DataLoader."""
import os

import torch
from torch.distributed import destroy_process_group, init_process_group
from torch.nn.parallel import DistributedDataParallel as DDP

backend = "nccl"
device = "cuda"
ddp = int(os.environ.get("RANK", -1)) != -1
if ddp:
    init_process_group(backend=backend)
    ddp_rank = int(os.environ["RANK"])
    ddp_local_rank = int(os.environ["LOCAL_RANK"])
    device = f"cuda:{ddp_local_rank}"
    torch.cuda.set_device(device)
    master_process = ddp_rank == 0
else:
    master_process = True
    device = "cuda:0"
model = build().to(device)
if ddp:
    model = DDP(model, device_ids=[ddp_local_rank])
scaler = torch.amp.GradScaler("cuda", enabled=True)
for iter_num in range(1000):
    with torch.autocast("cuda", dtype=torch.float16):
        loss = model(get_batch())
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    if iter_num % 100 == 0 and master_process:
        print(f"iter {iter_num}: loss {loss.item():.4f}")
        torch.save(model.state_dict(), os.path.join("out", "ckpt.pt"))
if ddp:
    destroy_process_group()
