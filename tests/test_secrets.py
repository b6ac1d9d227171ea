from __future__ import annotations

import pytest

from mgtutor.training.foundation.secrets import REDACTED, looks_secret, redact_env


@pytest.mark.parametrize("name", ["TORCH_HUB_TOKEN", "NCCL_IB_KEY", "MASTER_PASSWORD", "HF_TOKEN",
                                  "AWS_SECRET_ACCESS_KEY", "MGTUTOR_API_CREDENTIALS", "github_token"])
def test_secret_names_are_seen(name: str) -> None:
    assert looks_secret(name)


@pytest.mark.parametrize("name", ["NCCL_DEBUG", "MASTER_ADDR", "MASTER_PORT", "CUDA_VISIBLE_DEVICES",
                                  "OMP_NUM_THREADS", "TORCH_NCCL_ASYNC_ERROR_HANDLING"])
def test_ordinary_names_are_kept(name: str) -> None:
    assert not looks_secret(name)


def test_redact_env_keeps_names_and_hides_values() -> None:
    out = redact_env({"MASTER_ADDR": "10.0.0.1", "TORCH_HUB_TOKEN": "hf_abc"})
    assert out == {"MASTER_ADDR": "10.0.0.1", "TORCH_HUB_TOKEN": REDACTED}
