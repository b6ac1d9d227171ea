"""Message sizes the way nccl-tests spells them (8, 1K, 256M, 4G; powers of 1024) and the sweep."""
from __future__ import annotations

import re

_UNITS = {"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:I?B)?\s*$", re.IGNORECASE)

# Element size in bytes of each dtype name the bench accepts (nccl-tests' names and torch's).
DTYPE_SIZES = {
    "float": 4, "float32": 4, "half": 2, "float16": 2, "bfloat16": 2, "double": 8, "float64": 8,
    "int8": 1, "uint8": 1, "int32": 4, "int": 4, "int64": 8,
}
DTYPE_CANONICAL = {"float32": "float", "float16": "half", "float64": "double", "int": "int32"}


def parse_size(text: str | int) -> int:
    """'8' -> 8, '1K' -> 1024, '256M', '4G', '1.5K'; ValueError with the accepted forms otherwise."""
    if isinstance(text, int):
        value = text
    else:
        match = _SIZE.match(str(text))
        if not match:
            raise ValueError(f"bad size {text!r}: use bytes with an optional K, M or G suffix (8, 1K, 256M, 4G)")
        value = int(float(match.group(1)) * _UNITS[match.group(2).upper()])
    if value <= 0:
        raise ValueError(f"bad size {text!r}: must be more than 0 bytes")
    return value


def format_size(value: int) -> str:
    """8 -> '8B', 1024 -> '1K', 268435456 -> '256M' (exact units only; else bytes)."""
    for unit in ("G", "M", "K"):
        if value >= _UNITS[unit] and value % _UNITS[unit] == 0:
            return f"{value // _UNITS[unit]}{unit}"
    return f"{value}B"


def canonical_dtype(name: str) -> str:
    key = name.lower()
    if key not in DTYPE_SIZES:
        raise ValueError(f"unknown dtype {name!r}: use one of float, half, bfloat16, double, int8, uint8, int32, int64")
    return DTYPE_CANONICAL.get(key, key)


def sweep(min_bytes: int, max_bytes: int, factor: float = 2.0, step: int | None = None) -> list[int]:
    """Sizes from min to max multiplying by factor (or adding step), like nccl-tests -b/-e/-f/-i."""
    if min_bytes > max_bytes:
        raise ValueError(f"minimum size {format_size(min_bytes)} is above the maximum {format_size(max_bytes)}")
    if step is None and factor <= 1:
        raise ValueError(f"factor must be more than 1 (got {factor})")
    sizes, size = [], min_bytes
    while size <= max_bytes:
        sizes.append(size)
        nxt = size + step if step else int(size * factor)
        size = nxt if nxt > size else size + 1
    return sizes


def element_count(size: int, dtype: str) -> int:
    """Elements moved for a message of `size` bytes (at least one), as nccl-tests rounds."""
    return max(1, size // DTYPE_SIZES[dtype])
