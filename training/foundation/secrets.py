"""Which environment variables may be kept or shown: a value whose name looks secret never is."""
from __future__ import annotations

import re
from collections.abc import Mapping

# Any of these words anywhere in the name (TORCH_HUB_TOKEN, NCCL_IB_KEY, MASTER_PASSWORD,
# AWS_SECRET_ACCESS_KEY): a name that merely contains one is hidden too, as a kept secret costs more.
_SECRET_WORDS = re.compile(r"TOKEN|KEY|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH|COOKIE|PRIVATE",
                           re.IGNORECASE)
REDACTED = "<redacted>"


def looks_secret(name: str) -> bool:
    """True when a variable's name says its value is a secret (a token, key, password, credential)."""
    return bool(_SECRET_WORDS.search(name))


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    """The same variables, with every secret-looking value replaced by `<redacted>`."""
    return {k: (REDACTED if looks_secret(k) else v) for k, v in env.items()}
