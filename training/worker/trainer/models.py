"""The networks the trainer knows: a tiny CNN that trains in seconds on a CPU, and torchvision ResNets."""
from __future__ import annotations

import torch
from torch import nn

NUM_CLASSES = 10


class TinyCNN(nn.Module):
    """Two conv blocks and a linear head: small enough for CI, real enough to learn synthetic classes."""

    def __init__(self, num_classes: int = NUM_CLASSES) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(inplace=True), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(inplace=True), nn.AdaptiveAvgPool2d(1),
        )
        self.head = nn.Linear(32, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.flatten(self.features(x), 1))


class WithUnusedHead(nn.Module):
    """A model with a layer that forward never uses: DDP (without find_unused_parameters) waits
    forever for its gradient and fails at the next step with "Expected to have finished reduction"."""

    def __init__(self, body: nn.Module) -> None:
        super().__init__()
        self.body = body
        self.unused_head = nn.Linear(NUM_CLASSES, NUM_CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


def build_model(name: str, num_classes: int = NUM_CLASSES, image_size: int = 224) -> nn.Module:
    """`image_size` matters only to the vision transformer, whose position embedding has one entry per patch."""
    if name == "tinycnn":
        return TinyCNN(num_classes)
    import torchvision

    if name == "resnet18":
        return torchvision.models.resnet18(num_classes=num_classes)
    if name == "resnet50":
        return torchvision.models.resnet50(num_classes=num_classes)
    if name == "convnext_tiny":
        return torchvision.models.convnext_tiny(num_classes=num_classes)
    if name == "vit_b_16":
        return torchvision.models.vit_b_16(num_classes=num_classes, image_size=image_size)
    raise ValueError(f"unknown model {name!r}")


def params_digest(model: nn.Module) -> str:
    """sha256 over every parameter's bytes, in order: equal digests = bit-identical replicas."""
    import hashlib

    digest = hashlib.sha256()
    for param in model.parameters():
        digest.update(param.detach().float().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()
