"""Launched by torchrun; the world size is taken to be this node's GPU count."""
import os

import torch
import torch.distributed as dist


def reduce_mean(tensor, nprocs):
    rt = tensor.clone()
    dist.all_reduce(rt)
    rt /= nprocs
    return rt


def main(batch_size):
    nprocs = torch.cuda.device_count()
    local_rank = int(os.environ["LOCAL_RANK"])
    dist.init_process_group("gloo")
    batch_size = int(batch_size / nprocs)
    loss = torch.ones(()) * local_rank
    print(reduce_mean(loss, nprocs), batch_size)


if __name__ == "__main__":
    main(256)
