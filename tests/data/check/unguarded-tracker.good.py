import torch.distributed as dist
from torch.utils.tensorboard import SummaryWriter

dist.init_process_group("gloo")
writer = SummaryWriter("runs/exp") if dist.get_rank() == 0 else None
