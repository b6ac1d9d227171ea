"""A plain DDP script with argparse options and no mgtutor import, for `mgtutor fit` on CPU ranks (gloo):
--batch-size is its per-rank batch, --grad-accum its gradient accumulation; it would train for --steps
optimizer steps, far more than a trial lets it (tests/test_fit_run.py). --fail-at-start makes it fail
whatever the batch."""
import argparse

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, default=64, help="per-rank batch")
    parser.add_argument("--eval-batch-size", type=int, default=256)
    parser.add_argument("--grad-accum", type=int, default=1)
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--fail-at-start", action="store_true")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    if args.fail_at_start:
        raise ValueError("this script cannot find its data set")
    data = TensorDataset(torch.randn(4096, 16), torch.randint(0, 4, (4096,)))
    loader = DataLoader(data, batch_size=args.batch_size, sampler=DistributedSampler(data), drop_last=True)
    model = DistributedDataParallel(nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    step = 0
    while step < args.steps:
        for i, (inputs, labels) in enumerate(loader):
            loss = nn.functional.cross_entropy(model(inputs), labels) / args.grad_accum
            loss.backward()
            if (i + 1) % args.grad_accum == 0:
                optimizer.step()
                optimizer.zero_grad()
                step += 1
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
