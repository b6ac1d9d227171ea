"""Usage: python -m torch.distributed.launch --nproc_per_node 4 train.py"""
import torch.distributed as dist

dist.init_process_group("nccl")
