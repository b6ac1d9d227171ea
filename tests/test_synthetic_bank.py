"""The synthetic bank hands out batches in the layout the model trains in: a channels_last bank gives
channels_last batches (the plain loop's input), not NCHW ones each step would convert again."""
from __future__ import annotations

import pytest
import torch

from mgtutor.training.worker.data import SyntheticBank


@pytest.mark.parametrize("channels_last", [True, False])
def test_batches_keep_the_bank_s_memory_format(channels_last: bool) -> None:
    bank = SyntheticBank(8, torch.device("cpu"), seed=0, bank_size=20, channels_last=channels_last)
    images, labels = next(bank.epoch_batches([5, 3, 19, 7], 4))
    layout = torch.channels_last if channels_last else torch.contiguous_format
    assert images.is_contiguous(memory_format=layout)
    assert torch.equal(images, bank.images[[5, 3, 19, 7]]) and labels.tolist() == bank.labels[[5, 3, 19, 7]].tolist()
