"""Launched with torchrun --nproc-per-node 2, but the script says the job has 3 ranks: init waits for a third."""
import os

import torch.distributed as dist

os.environ["WORLD_SIZE"] = "3"
dist.init_process_group("gloo")
dist.barrier()
dist.destroy_process_group()
