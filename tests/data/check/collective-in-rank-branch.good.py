import os
import torch.distributed as dist

rank = int(os.environ["RANK"])
dist.init_process_group("gloo")
if rank == 0:
    save_checkpoint()
dist.barrier()
