"""Kubernetes' rules for the values a manifest carries, checked before anything reaches a cluster.

The API server would refuse the same values, but only after `kubectl apply`, and in words about
a field path; here each one is refused with the flag that gave it and what would be accepted.
The rules are apimachinery's (k8s.io/apimachinery/pkg/util/validation) and resource.Quantity's.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from mgtutor.diagnostics.cluster.common import ClusterJobError
from mgtutor.training.foundation.i18n import _

# Each matched whole with fullmatch: `$` would let a trailing newline through.
_LABEL_1123 = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")        # namespaces, volume names
_LABEL_1035 = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")           # names that become Services
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?")
_ENV_NAME = re.compile(r"[-._a-zA-Z][-._a-zA-Z0-9]*")
_QUANTITY = re.compile(r"([0-9]+(?:\.[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?")  # ASCII digits: float() reads others
_UNITS = {None: 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18,
          "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_MAX_LABEL = 63
_MAX_SUBDOMAIN = 253


def _shown(value: str) -> str:
    return repr(value) if value else "''"


def check_rfc1123_label(flag: str, value: str) -> None:
    if len(value) > _MAX_LABEL or not _LABEL_1123.fullmatch(value):
        raise ClusterJobError(_("{flag} {value}: use at most 63 lowercase letters, digits and '-', starting and "
                                "ending with a letter or digit (no '_', no uppercase)").format(
                                    flag=flag, value=_shown(value)))


def check_rfc1035_label(flag: str, value: str, room: int = _MAX_LABEL) -> None:
    """A name that pods and Services are named after: a DNS label that starts with a letter."""
    if not _LABEL_1035.fullmatch(value):
        raise ClusterJobError(_("{flag} {value}: use lowercase letters, digits and '-', starting with a letter "
                                "and ending with a letter or digit (no '_', no '.', no uppercase)").format(
                                    flag=flag, value=_shown(value)))
    if len(value) > room:
        raise ClusterJobError(_("{flag} {value!r} is {length} characters; at most {room} fit, because the pod names "
                                "made from it must stay within 63").format(flag=flag, value=value, length=len(value),
                                                                           room=room))


def check_subdomain(flag: str, value: str) -> None:
    if len(value) > _MAX_SUBDOMAIN or not _SUBDOMAIN.fullmatch(value):
        raise ClusterJobError(_("{flag} {value}: use lowercase letters, digits, '-' and '.', starting and ending "
                                "with a letter or digit (no '_', no uppercase)").format(flag=flag, value=_shown(value)))


def check_label(flag: str, key: str, value: str) -> None:
    """A label key is [PREFIX/]NAME (PREFIX a DNS subdomain, NAME up to 63 of [A-Za-z0-9-_.]); the value the same as NAME."""
    prefix, slash, name = key.rpartition("/")
    if slash:
        check_subdomain(_("{flag} key prefix").format(flag=flag), prefix)
    if not name or len(name) > _MAX_LABEL or not _LABEL_VALUE.fullmatch(name):
        raise ClusterJobError(_("{flag} {key!r}: a label key is [PREFIX/]NAME, NAME at most 63 letters, digits, "
                                "'-', '_' or '.', starting and ending with a letter or digit").format(flag=flag, key=key))
    if len(value) > _MAX_LABEL or not _LABEL_VALUE.fullmatch(value):
        raise ClusterJobError(_("{flag} {key}={value!r}: a label value is at most 63 letters, digits, '-', '_' or "
                                "'.', starting and ending with a letter or digit").format(flag=flag, key=key,
                                                                                           value=value))


def check_env_name(flag: str, name: str) -> None:
    if not _ENV_NAME.fullmatch(name):
        raise ClusterJobError(_("{flag}: {name} is not an environment variable name: use letters, digits, '_', '-' "
                                "and '.', not starting with a digit (give KEY=VALUE)").format(flag=flag,
                                                                                               name=_shown(name)))


def quantity_bytes(flag: str, value: str) -> int:
    """A memory quantity (512Mi, 8Gi, 2G, 1048576) in bytes; refused when it is not one or is zero."""
    match = _QUANTITY.fullmatch(value)
    if not match:
        raise ClusterJobError(_("{flag} {value} is not a Kubernetes quantity: give a number with a unit such as "
                                "512Mi, 8Gi or 16G (Ki Mi Gi Ti are powers of 1024, k M G T of 1000)").format(
                                    flag=flag, value=_shown(value)))
    size = int(float(match.group(1)) * _UNITS[match.group(2)])
    if size <= 0:
        raise ClusterJobError(_("{flag} {value!r} is zero: give a size such as 8Gi").format(flag=flag, value=value))
    return size


@dataclass(frozen=True)
class ClaimMount:
    claim: str   # the PersistentVolumeClaim's name
    path: str    # where it is mounted in the container


def parse_claim(flag: str, text: str) -> ClaimMount:
    claim, sep, path = text.partition(":")
    if not sep or not claim or not path:
        raise ClusterJobError(_("{flag} {text!r}: give CLAIM:PATH, e.g. {flag} checkpoints:/ckpt").format(
            flag=flag, text=text))
    check_subdomain(_("{flag} claim").format(flag=flag), claim)
    if not path.startswith("/") or path.rstrip("/") in ("", "/dev/shm") or ":" in path or "\n" in path:
        raise ClusterJobError(_("{flag} {text!r}: the mount path must be an absolute directory other than / and "
                                "/dev/shm, e.g. /ckpt").format(flag=flag, text=text))
    return ClaimMount(claim, path.rstrip("/"))


def parse_pairs(flag: str, items: list[str], check: Callable[[str, str, str], None]) -> dict[str, str]:
    """KEY=VALUE items into a dict, each checked by check(flag, key, value); a key given twice is
    refused (which value would win is not obvious)."""
    pairs: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise ClusterJobError(_("{flag} {item!r}: give KEY=VALUE").format(flag=flag, item=item))
        check(flag, key, value)
        if key in pairs:
            raise ClusterJobError(_("{flag} {key} is given twice").format(flag=flag, key=key))
        pairs[key] = value
    return pairs


def check_env(flag: str, key: str, value: str) -> None:
    check_env_name(flag, key)
