"""Usage: torchrun --nproc-per-node 4 train.py"""
import torch.distributed as dist

dist.init_process_group("nccl")
