"""Where batches come from: synthetic images made on the device, or a real CPU input pipeline.

Either way an epoch is a list of sample indices chosen by a sampler (DistributedSampler under DDP,
or the same seeded shuffle on every rank for `--inject no-sampler`), so which samples a rank saw
can be recorded and compared, and a resumed run can skip exactly the batches already trained on.
"""
from __future__ import annotations

import pickle
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch.utils.data import DataLoader, Dataset, DistributedSampler, Sampler

from mgtutor.training.worker.trainer.models import NUM_CLASSES

if TYPE_CHECKING:
    from torchvision.datasets import ImageFolder

MEAN, STD = (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)


class SameOrderShuffle:
    """What a script without DistributedSampler gets: every rank shuffles with the same seed."""

    def __init__(self, length: int, seed: int) -> None:
        self.length, self.seed, self.epoch = length, seed, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self) -> Iterator[int]:
        g = torch.Generator().manual_seed(self.seed + self.epoch)
        return iter(torch.randperm(self.length, generator=g).tolist())

    def __len__(self) -> int:
        return self.length


class EpochIndices(Sampler[int]):
    """Yields the index list set for the current epoch; the DataLoader's persistent workers survive."""

    def __init__(self) -> None:
        self.indices: list[int] = []

    def __iter__(self) -> Iterator[int]:
        return iter(self.indices)

    def __len__(self) -> int:
        return len(self.indices)


def make_sampler(length: int, world_size: int, rank: int, seed: int, distributed: bool) -> Any:
    if distributed:
        # torch annotates `dataset: Dataset`, but the sampler only takes its len(): a range is enough
        return DistributedSampler(range(length), num_replicas=world_size, rank=rank,  # type: ignore[arg-type]
                                  shuffle=True, seed=seed, drop_last=True)
    return SameOrderShuffle(length, seed)


def synthetic_bank_size(length: int, per_step: int) -> int:
    """Images the synthetic bank keeps on the device: four steps' worth (at least 512), at most an epoch."""
    return min(length, max(4 * per_step, 512))


class SyntheticBank:
    """Labelled random images kept on the device; sample i is image i mod bank size.

    Each class adds its own fixed pattern to the noise, so the labels are learnable and the loss
    really falls. Nothing crosses PCIe per step: one index tensor per epoch, one gather per step.
    """

    def __init__(self, image_size: int, device: torch.device, seed: int, bank_size: int,
                 channels_last: bool) -> None:
        g = torch.Generator(device=device).manual_seed(seed)
        shape = (3, image_size, image_size)
        # a per-class colour survives pooling, a per-class texture does not: both make it learnable fast
        patterns = (0.5 * torch.randn((NUM_CLASSES, *shape), generator=g, device=device)
                    + torch.randn((NUM_CLASSES, 3, 1, 1), generator=g, device=device))
        self.labels = torch.randint(0, NUM_CLASSES, (bank_size,), generator=g, device=device)
        self.images = torch.empty((bank_size, *shape), device=device)
        if channels_last:
            self.images = self.images.contiguous(memory_format=torch.channels_last)
        for start in range(0, bank_size, 256):  # bounded temporaries at 224×224
            chunk = self.labels[start:start + 256]
            noise = torch.randn((len(chunk), *shape), generator=g, device=device)
            self.images[start:start + len(chunk)] = noise + patterns[chunk]
        self.device = device

    def epoch_selections(self, indices: list[int], batch_size: int) -> Iterator[torch.Tensor]:
        """Each batch's rows of the bank, as an index tensor on the device (`gather` makes the batch)."""
        idx = torch.tensor(indices, dtype=torch.long)
        if self.device.type == "cuda":
            idx = idx.pin_memory()  # from pageable memory the copy would wait for the whole GPU queue
        idx = idx.to(self.device, non_blocking=True) % len(self.labels)
        for start in range(0, len(indices) - batch_size + 1, batch_size):
            yield idx[start:start + batch_size]

    def gather(self, sel: torch.Tensor, out: tuple[torch.Tensor, torch.Tensor] | None = None
               ) -> tuple[torch.Tensor, torch.Tensor]:
        """The images and labels at `sel`, in the bank's layout; written into `out` (the same layout,
        e.g. a CUDA graph's static inputs) and returned as it, when given, which saves a copy."""
        if out is None:
            # indexing keeps the bank's channels_last layout; index_select would return NCHW, and every
            # step would pay a layout conversion before the first convolution
            return self.images[sel], self.labels[sel]
        images, labels = out
        if images.is_contiguous():
            torch.index_select(self.images, 0, sel, out=images)
        else:  # channels_last: the same gather on the (contiguous) NHWC views
            torch.index_select(self.images.permute(0, 2, 3, 1), 0, sel, out=images.permute(0, 2, 3, 1))
        torch.index_select(self.labels, 0, sel, out=labels)
        return out


class CifarBatches(Dataset):
    """CIFAR-10's python-pickle batches (data_batch_1…5) read from disk, as PIL images.

    Read directly rather than with torchvision.datasets.CIFAR10, which insists on the official
    checksums: a generated stand-in folder (tests/bench/make_fake_cifar.py) must load too.
    """

    def __init__(self, root: str, transform: Any) -> None:
        import numpy as np

        folder = Path(root)
        if (folder / "cifar-10-batches-py").is_dir():
            folder = folder / "cifar-10-batches-py"
        files = sorted(folder.glob("data_batch_*"))
        if not files:
            raise FileNotFoundError(f"no CIFAR-10 data_batch_* files under {root} (expected cifar-10-batches-py/)")
        data, labels = [], []
        for path in files:
            with path.open("rb") as handle:
                batch = pickle.load(handle, encoding="bytes")
            data.append(batch[b"data"])
            labels += list(batch[b"labels"])
        self.images = np.concatenate(data).reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)  # HWC uint8
        self.labels = labels
        self.transform = transform

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> tuple[Any, int]:
        from PIL import Image

        return self.transform(Image.fromarray(self.images[index])), self.labels[index]


def real_dataset(kind: str, data_dir: str, image_size: int) -> CifarBatches | ImageFolder:
    """The seed recipe's CPU pipeline: PIL augmentations, ToTensor, Normalize."""
    from torchvision import datasets, transforms

    normalize = transforms.Normalize(MEAN, STD)
    if kind == "cifar10":
        steps = [transforms.RandomCrop(32, padding=4), transforms.RandomHorizontalFlip()]
        if image_size != 32:
            steps.append(transforms.Resize(image_size))
        return CifarBatches(data_dir, transforms.Compose([*steps, transforms.ToTensor(), normalize]))
    return datasets.ImageFolder(data_dir, transforms.Compose([
        transforms.RandomResizedCrop(image_size), transforms.RandomHorizontalFlip(),
        transforms.ToTensor(), normalize]))


def real_loader(dataset: Dataset, sampler: EpochIndices, batch_size: int, workers: int, pin: bool) -> DataLoader:
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler, num_workers=workers,
                      pin_memory=pin, persistent_workers=workers > 0, drop_last=True,
                      prefetch_factor=4 if workers > 0 else None)
