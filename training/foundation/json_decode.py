"""One way to read JSON that someone else wrote (a run record, an event line, a report to check): parse it
with limits, then decode it into a dataclass, with one error, `DecodeError`, that names the field and says why.

    data = parse(text)                         # DecodeError: nested too deep, a 400-digit number, NaN
    event = decode(StepEvent, data)            # strict: the first field that does not fit is raised
    meta, wrong = decode_lenient(RunMeta, data)  # a field that does not fit takes its default, listed in `wrong`
    fit(value, int | None, "$.pid")            # one value against one type

Limits, because the text may be hostile: the nesting depth (the C parser recurses; so would a reader),
an integer's digits (a 400-digit number cannot become a float; 20 digits hold any int64), no NaN or
Infinity (not JSON; 1e400 is Infinity too).

The type rules, the same for events, records and schemas: `int` takes a JSON integer within int64 (or an
integral number such as 2.0: JSON has one number type), never a bool; `float` any finite number but a
bool; `str`, `bool`, None, `Any`; `list[X]`, `tuple[X, ...]`, `dict[str, X]`; a union the first arm that
fits; a str-valued Enum a string (its member, or the string left for the class to read: a record's
unknown status takes its default); a dataclass an object. `Annotated[int, Bounds(0, 65536)]` bounds a number,
`Annotated[list[X], Bounds(items=N)]` a list's length (checked before its items are), `Bounds(pattern=…)`
what a string must match.
A dataclass field named `extra` keeps the keys the class does not name; names in `skip` (what the reader
fills itself: a line number, a problem) are never read from the JSON.
"""
from __future__ import annotations

import json
import math
from typing import Any

from mgtutor.training.foundation.json_checks import (
    Bounds,
    DecodeError,
    decode,
    decode_lenient,
    fit,
    json_name,
    shown,
)

MAX_DEPTH = 64
MAX_INT_DIGITS = 20


def _whole(digits: str) -> int:
    if len(digits.lstrip("-")) > MAX_INT_DIGITS:
        raise DecodeError("$", f"an integer of {len(digits.lstrip('-'))} digits (at most {MAX_INT_DIGITS})")
    return int(digits)


def _finite(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise DecodeError("$", f"the number {text[:24]} is out of range")
    return number


def _no_constant(name: str) -> Any:
    raise DecodeError("$", f"{name} is not a JSON number")


_SHAPES = bytes.maketrans(b"123456789E-", b"000000000e+")  # every digit a 0, every exponent an e+


def _may_overflow(text: str) -> bool:
    """Whether `text` may hold an integer of more than 20 digits or an exponent of three (inside a string
    too: then only the slower hooks run). A translate and three searches: a regex took twice json's time."""
    shape = text.encode("utf-8", "surrogatepass").translate(_SHAPES)
    return b"0" * (MAX_INT_DIGITS + 1) in shape or b"e000" in shape or b"e+000" in shape


_FAST = json.JSONDecoder(parse_constant=_no_constant)
_CAREFUL = json.JSONDecoder(parse_int=_whole, parse_float=_finite, parse_constant=_no_constant)  # a call per number


def parse(text: str | bytes, max_depth: int = MAX_DEPTH) -> Any:
    """The JSON value of `text`, or DecodeError: not JSON, nested deeper than `max_depth`, an integer of more
    than 20 digits, NaN, Infinity, or a number out of a float's range."""
    try:
        text = text.decode("utf-8") if isinstance(text, bytes) else text
        data = (_CAREFUL if _may_overflow(text) else _FAST).decode(text)
    except DecodeError:
        raise
    except RecursionError:
        raise DecodeError("$", f"nested deeper than {max_depth} levels") from None
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError
        raise DecodeError("$", f"not JSON ({exc})") from None
    if text.count("[") + text.count("{") > max_depth:  # fewer brackets than levels cannot nest too deep
        _within_depth(data, max_depth)
    return data


def _within_depth(data: Any, most: int) -> None:
    stack = [(data, 1)]
    while stack:
        value, level = stack.pop()
        children = value.values() if isinstance(value, dict) else value
        if level > most:
            raise DecodeError("$", f"nested deeper than {most} levels")
        stack.extend((child, level + 1) for child in children if isinstance(child, (dict, list)))


__all__ = ["Bounds", "DecodeError", "decode", "decode_lenient", "fit", "json_name", "parse", "shown"]
