"""The world size from the process group; device_count only picks the GPU."""
import torch
import torch.distributed as dist


def main(batch_size):
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    device = rank % max(torch.cuda.device_count(), 1)
    batch_size = batch_size // dist.get_world_size()
    loss = torch.ones(())
    dist.all_reduce(loss)
    loss /= dist.get_world_size()
    print(device, batch_size, loss)


if __name__ == "__main__":
    main(256)
