import torch
import torch.distributed as dist

dist.init_process_group(backend="nccl" if torch.cuda.is_available() else "gloo")
