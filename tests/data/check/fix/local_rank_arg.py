"""The old launcher's --local_rank argument: under torchrun every rank keeps the default."""
import argparse

import torch.distributed as dist

parser = argparse.ArgumentParser()
parser.add_argument("--local_rank", type=int, default=0)
args = parser.parse_args()
dist.init_process_group("gloo")
print(f"rank {dist.get_rank()} thinks its local rank is {args.local_rank}", flush=True)
dist.destroy_process_group()
