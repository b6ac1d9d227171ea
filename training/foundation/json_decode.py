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

import dataclasses
import functools
import json
import math
import re
import reprlib
import types
import typing
from collections.abc import Collection
from dataclasses import dataclass
from enum import Enum
from typing import Any, TypeVar

MAX_DEPTH = 64
MAX_INT_DIGITS = 20
INT64 = 1 << 63
T = TypeVar("T")


class DecodeError(ValueError):
    """Why JSON cannot be read as asked: `where` names the field ("$.ranks[3].exit_code"), `why` the reason,
    `value` is what was there."""

    def __init__(self, where: str, why: str, value: Any = None) -> None:
        super().__init__(f"{where}: {why}")
        self.where, self.why, self.value = where, why, value

    @property
    def field(self) -> str:
        """The path without its root: "ranks[3].exit_code"."""
        return self.where[2:] if self.where.startswith("$.") else self.where.lstrip("$")


@dataclass(frozen=True)
class Bounds:
    """Where a number may lie (`low`..`high`, inclusive), how many items a list may hold, and what a
    string must match whole (`pattern`: a signal's name is no place for an escape sequence)."""
    low: float | None = None
    high: float | None = None
    items: int | None = None
    pattern: str | None = None


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


def parse(text: str | bytes, max_depth: int = MAX_DEPTH) -> Any:
    """The JSON value of `text`, or DecodeError: not JSON, nested deeper than `max_depth`, an integer of more
    than 20 digits, NaN, Infinity, or a number out of a float's range."""
    try:
        data = json.loads(text, parse_int=_whole, parse_float=_finite, parse_constant=_no_constant)
    except DecodeError:
        raise
    except RecursionError:
        raise DecodeError("$", f"nested deeper than {max_depth} levels") from None
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError
        raise DecodeError("$", f"not JSON ({exc})") from None
    opening = text.count(b"[") + text.count(b"{") if isinstance(text, bytes) else text.count("[") + text.count("{")
    if opening > max_depth:  # fewer brackets than levels cannot nest too deep
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


_SHORT = reprlib.Repr()
_SHORT.maxstring, _SHORT.maxother, _SHORT.maxlist, _SHORT.maxdict, _SHORT.maxlevel = 36, 36, 4, 4, 2


def shown(value: Any, most: int = 40) -> str:
    """`value` in at most `most` characters, cheap for a list of millions (reprlib looks at a few items)."""
    text = _SHORT.repr(value)
    return text if len(text) <= most else text[:most - 3] + "..."


_JSON_NAMES = {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "an array",
               dict: "an object", type(None): "null"}


def json_name(value: Any) -> str:
    return _JSON_NAMES.get(type(value), type(value).__name__)


def _wanted(hint: Any) -> str:
    hint = _strip(hint)[0]
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return " or ".join(_wanted(arm) for arm in typing.get_args(hint))
    if isinstance(hint, type) and issubclass(hint, Enum):
        return "one of " + ", ".join(str(m.value) for m in hint)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return "an object"
    return _JSON_NAMES.get(typing.get_origin(hint) or hint, str(hint))


@dataclass
class _Reading:
    """One decode: the names never read from JSON, and (lenient) the fields that took their default."""
    skip: Collection[str] = ()
    wrong: list[DecodeError] | None = None


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls, include_extras=True)


def _strip(hint: Any) -> tuple[Any, Bounds | None]:
    if typing.get_origin(hint) is typing.Annotated:
        bounds = next((m for m in hint.__metadata__ if isinstance(m, Bounds)), None)
        return hint.__origin__, bounds
    return hint, None


def fit(value: Any, hint: Any, where: str = "$") -> Any:
    """`value` as `hint` asks (a dataclass decoded, an array made a tuple, 2.0 made 2), or DecodeError."""
    return _fit(value, hint, where, _Reading())


def _fit(value: Any, hint: Any, where: str, reading: _Reading) -> Any:
    hint, bounds = _strip(hint)
    origin = typing.get_origin(hint)
    if hint is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        return _fit_union(value, hint, where, reading, bounds)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return _decode(hint, value, where, reading)
    if origin in (list, tuple) or hint in (list, tuple):
        return _fit_list(value, hint, where, reading, bounds)
    if origin is dict or hint is dict:
        if not isinstance(value, dict):
            raise DecodeError(where, f"expected an object, got {json_name(value)}", value)
        item = (typing.get_args(hint) or (str, Any))[1]
        return {k: _fit(v, item, f"{where}.{k}", reading) for k, v in value.items()}
    return _fit_scalar(value, hint, where, bounds)


def _fit_union(value: Any, hint: Any, where: str, reading: _Reading, bounds: Bounds | None) -> Any:
    for arm in typing.get_args(hint):
        try:
            return _fit(value, typing.Annotated[arm, bounds] if bounds and arm is not type(None) else arm,
                        where, reading)
        except DecodeError as exc:
            if exc.where != where:  # a nested field is wrong: that says more than "expected X or Y"
                raise
    raise DecodeError(where, f"expected {_wanted(hint)}, got {json_name(value)}", value)


def _fit_list(value: Any, hint: Any, where: str, reading: _Reading, bounds: Bounds | None) -> Any:
    if not isinstance(value, (list, tuple)):
        raise DecodeError(where, f"expected an array, got {json_name(value)}", value)
    if bounds and bounds.items is not None and len(value) > bounds.items:
        raise DecodeError(where, f"{len(value)} items (at most {bounds.items})", value)
    item = (typing.get_args(hint) or (Any,))[0]
    items = [_fit(v, item, f"{where}[{i}]", reading) for i, v in enumerate(value)]
    return tuple(items) if (typing.get_origin(hint) or hint) is tuple else items


def _fit_scalar(value: Any, hint: Any, where: str, bounds: Bounds | None) -> Any:
    if hint is type(None) or hint is None:
        if value is None:
            return None
    elif hint is bool or hint is str:
        if isinstance(value, hint):
            if bounds and bounds.pattern and isinstance(value, str) and not re.fullmatch(bounds.pattern, value):
                raise DecodeError(where, f"{shown(value)} is not of the form {bounds.pattern}", value)
            return value
    elif isinstance(hint, type) and issubclass(hint, Enum):
        if isinstance(value, str):  # one of its values is its member; another is left for the class to read
            try:
                return hint(value)
            except ValueError:
                return value
    elif hint in (int, float) and isinstance(value, (int, float)) and not isinstance(value, bool):
        return _number(value, hint, where, bounds)
    raise DecodeError(where, f"expected {_wanted(hint)}, got {json_name(value)}", value)


def _number(value: float, hint: type, where: str, bounds: Bounds | None) -> float:
    if isinstance(value, float) and not math.isfinite(value):
        raise DecodeError(where, f"{value} is no finite number", value)
    if hint is int:
        if isinstance(value, float) and not value.is_integer():
            raise DecodeError(where, f"expected an integer, got {value}", value)
        if not -INT64 <= value < INT64:
            raise DecodeError(where, f"{shown(value)} is out of the int64 range", value)
        value = int(value)
    low = bounds.low if bounds else None
    high = bounds.high if bounds else None
    if (low is not None and value < low) or (high is not None and value > high):
        raise DecodeError(where, f"{shown(value)} is not within {low:g}..{high:g}"
                          if low is not None and high is not None else f"{shown(value)} is out of range", value)
    return value


def decode(cls: type[T], data: Any, skip: Collection[str] = (), where: str = "$") -> T:
    """The dataclass `cls` from a JSON object; DecodeError names the first field that does not fit."""
    return _decode(cls, data, where, _Reading(skip))


def decode_lenient(cls: type[T], data: Any, skip: Collection[str] = (), where: str = "$") -> tuple[T, list[DecodeError]]:
    """The dataclass `cls` from a JSON object, every field that does not fit (nested ones too) left at its
    default and listed; DecodeError only when `data` is no object or a field with no default is missing."""
    reading = _Reading(skip, [])
    obj = _decode(cls, data, where, reading)
    return obj, reading.wrong or []


def _decode(cls: type[T], data: Any, where: str, reading: _Reading) -> T:
    if isinstance(data, cls):
        return data
    if not isinstance(data, dict):
        raise DecodeError(where, f"expected an object, got {json_name(data)}", data)
    hints = _hints(cls)  # type: ignore[arg-type]
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}  # type: ignore[arg-type]
    kwargs: dict[str, Any] = {}
    for name, spec in fields.items():
        if name not in data and spec.default is dataclasses.MISSING and spec.default_factory is dataclasses.MISSING:
            raise DecodeError(f"{where}.{name}", "missing")
    for name, value in data.items():  # in the JSON's order: a record's problem lists its fields as the file does
        if name not in fields or name == "extra" or name in reading.skip:
            continue
        try:
            kwargs[name] = _fit(value, hints[name], f"{where}.{name}", reading)
        except DecodeError as exc:
            if reading.wrong is None:
                raise
            reading.wrong.append(DecodeError(f"{where}.{name}", exc.why, value))
    if "extra" in fields:
        kwargs["extra"] = {k: v for k, v in data.items() if k not in fields}
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as exc:
        raise DecodeError(where, str(exc), data) from None


__all__ = ["Bounds", "DecodeError", "decode", "decode_lenient", "fit", "json_name", "parse", "shown"]
