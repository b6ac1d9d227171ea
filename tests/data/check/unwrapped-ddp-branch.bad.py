"""DDP only when CUDA is there: gloo ranks on a CPU machine train unsynchronised copies."""
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
model = torch.nn.Linear(4, 4)
if torch.cuda.is_available():
    model = DDP(model.cuda(), device_ids=[torch.cuda.current_device()])
else:
    print("Distributed training requires CUDA: gradients will not be synchronized")
