"""The synthetic bank hands out batches in the layout the model trains in: a channels_last bank gives
channels_last batches (the plain loop's input), not NCHW ones each step would convert again."""
from __future__ import annotations

import pytest
import torch

from mgtutor.training.worker.trainer.data import SyntheticBank


@pytest.mark.parametrize("channels_last", [True, False])
def test_batches_keep_the_bank_s_memory_format(channels_last: bool) -> None:
    bank = SyntheticBank(8, torch.device("cpu"), seed=0, bank_size=20, channels_last=channels_last)
    images, labels = bank.gather(next(bank.epoch_selections([5, 3, 19, 7], 4)))
    layout = torch.channels_last if channels_last else torch.contiguous_format
    assert images.is_contiguous(memory_format=layout)
    assert torch.equal(images, bank.images[[5, 3, 19, 7]]) and labels.tolist() == bank.labels[[5, 3, 19, 7]].tolist()


@pytest.mark.parametrize("channels_last", [True, False])
def test_a_batch_gathered_into_given_tensors_equals_indexing_and_keeps_their_layout(channels_last: bool) -> None:
    """What a CUDA graph's step reads from its static inputs: the gather writes there, no copy after."""
    bank = SyntheticBank(8, torch.device("cpu"), seed=0, bank_size=20, channels_last=channels_last)
    layout = torch.channels_last if channels_last else torch.contiguous_format
    out = (torch.empty((4, 3, 8, 8)).contiguous(memory_format=layout), torch.empty(4, dtype=torch.long))
    for sel in bank.epoch_selections([5, 3, 19, 7, 26, 0, 11, 2], 4):  # 26 is image 6 (mod the bank)
        images, labels = bank.gather(sel, out)
        assert images is out[0] and labels is out[1]
        assert images.is_contiguous(memory_format=layout)
        assert torch.equal(images, bank.images[sel]) and torch.equal(labels, bank.labels[sel])
    assert sel.tolist() == [6, 0, 11, 2]
