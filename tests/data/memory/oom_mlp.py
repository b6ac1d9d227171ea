"""A training script that runs out of GPU memory for real: a deep MLP whose batch doubles every step.

The activations of `forward` grow with the batch until the allocator gives up; weights, gradients
and the SGD momentum stay the same size. tests/gpu/test_maxbatch_gpu.py runs it under
`mgtutor run --memory` and reads what the recorder says filled the memory.
"""
import os

import torch
from torch import nn


class Deep(nn.Module):
    """Narrow layers (little arithmetic per byte kept) and one 1 GiB table (parameters you can see)."""

    def __init__(self, width: int = 512, depth: int = 16) -> None:
        super().__init__()
        self.table = nn.Parameter(torch.zeros(1 << 28))
        self.layers = nn.ModuleList(nn.Linear(width, width) for _ in range(depth))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.table[: x.shape[1]]
        for layer in self.layers:
            x = torch.relu(layer(x))  # the activations kept for backward: they fill the GPU
        return x


def main() -> None:
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    torch.cuda.set_device(device)
    model = Deep().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    batch = 1 << 14
    while True:
        x = torch.randn(batch, 512, device=device)
        model(x).square().mean().backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        print(f"batch {batch} trained", flush=True)
        batch *= 2


if __name__ == "__main__":
    main()
