"""torchrun's environment says how many ranks there are and which one this is."""
import os

import torch.distributed as dist

world_size = int(os.environ["WORLD_SIZE"])
rank = int(os.environ["RANK"])
dist.init_process_group("gloo", world_size=world_size, rank=rank)
dist.barrier()
dist.destroy_process_group()
