"""The checks behind json_decode's `decode` and `fit`: one per type, built once from the annotation
(functools.cache), so an events.jsonl of a million lines is read without looking at a type again.
The rules are json_decode's (training/foundation/json_decode.py); import from there.
"""
from __future__ import annotations

import dataclasses
import functools
import math
import re
import reprlib
import types
import typing
from collections.abc import Callable, Collection
from dataclasses import dataclass
from enum import Enum
from typing import Any, TypeVar

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


Check = Callable[[Any, str, _Reading], Any]  # (value, where, reading) -> the value as the type asks


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
    return _checker(hint)(value, where, _Reading())


# Each type is read by a check built once (functools.cache): an events.jsonl of a million lines is read
# without looking at a type annotation again.
@functools.cache
def _checker(hint: Any) -> Check:
    hint, bounds = _strip(hint)
    origin = typing.get_origin(hint)
    if hint is Any:
        return lambda value, where, reading: value
    if origin in (typing.Union, types.UnionType):
        return _union_check(hint, bounds)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return lambda value, where, reading: _decode(hint, value, where, reading)
    if origin in (list, tuple) or hint in (list, tuple):
        return _list_check(hint, bounds)
    if origin is dict or hint is dict:
        item = _checker((typing.get_args(hint) or (str, Any))[1])

        def check_dict(value: Any, where: str, reading: _Reading) -> Any:
            if not isinstance(value, dict):
                raise DecodeError(where, f"expected an object, got {json_name(value)}", value)
            return {k: item(v, f"{where}.{k}", reading) for k, v in value.items()}
        return check_dict
    return _scalar_check(hint, bounds)


def _accepts(hint: Any) -> tuple[type, ...] | None:
    """The Python types of the JSON values an arm of a union may take (None: any)."""
    hint = _strip(hint)[0]
    origin = typing.get_origin(hint) or hint
    if hint in (None, type(None)):
        return (type(None),)
    if hint in (int, float):
        return (int, float)
    if isinstance(hint, type) and (issubclass(hint, Enum) or hint is str):
        return (str,)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return (dict, hint)
    if origin in (list, tuple):
        return (list, tuple)
    return (origin,) if isinstance(origin, type) and hint is not Any else None


def _union_check(hint: Any, bounds: Bounds | None) -> Check:
    arms = [(_accepts(arm), _checker(typing.Annotated[arm, bounds] if bounds and arm is not type(None) else arm))
            for arm in typing.get_args(hint)]
    by_type: dict[type, Check] = {}  # the first arm for a value of this exact type: no arm tried in vain
    for accepts, arm in arms:
        for kind in accepts or ():
            by_type.setdefault(kind, arm)
    wanted = _wanted(hint)

    def check(value: Any, where: str, reading: _Reading) -> Any:
        first = by_type.get(type(value))
        if first is not None:
            try:
                return first(value, where, reading)
            except DecodeError as exc:
                if exc.where != where:
                    raise
        for accepts, arm in arms:
            if accepts is not None and not isinstance(value, accepts):
                continue
            try:
                return arm(value, where, reading)
            except DecodeError as exc:
                if exc.where != where:  # a nested field is wrong: that says more than "expected X or Y"
                    raise
        raise DecodeError(where, f"expected {wanted}, got {json_name(value)}", value)
    return check


def _list_check(hint: Any, bounds: Bounds | None) -> Check:
    item = _checker((typing.get_args(hint) or (Any,))[0])
    most = bounds.items if bounds else None
    as_tuple = (typing.get_origin(hint) or hint) is tuple

    def check(value: Any, where: str, reading: _Reading) -> Any:
        if not isinstance(value, (list, tuple)):
            raise DecodeError(where, f"expected an array, got {json_name(value)}", value)
        if most is not None and len(value) > most:
            raise DecodeError(where, f"{len(value)} items (at most {most})", value)
        items = [item(v, f"{where}[{i}]", reading) for i, v in enumerate(value)]
        return tuple(items) if as_tuple else items
    return check


def _scalar_check(hint: Any, bounds: Bounds | None) -> Check:
    if hint in (int, float):
        return _number_check(hint, bounds)
    pattern = re.compile(bounds.pattern) if bounds and bounds.pattern else None
    wanted = _wanted(hint)
    enum = hint if isinstance(hint, type) and issubclass(hint, Enum) else None

    def check(value: Any, where: str, reading: _Reading) -> Any:
        if enum is not None and isinstance(value, str):  # its member; another string is left for the class
            try:
                return enum(value)
            except ValueError:
                return value
        if (value is None and hint in (None, type(None))) or (hint in (bool, str) and isinstance(value, hint)):
            if pattern is not None and isinstance(value, str) and not pattern.fullmatch(value):
                raise DecodeError(where, f"{shown(value)} is not of the form {pattern.pattern}", value)
            return value
        raise DecodeError(where, f"expected {wanted}, got {json_name(value)}", value)
    return check


def _number_check(hint: type, bounds: Bounds | None) -> Check:
    low = bounds.low if bounds and bounds.low is not None else -math.inf
    high = bounds.high if bounds and bounds.high is not None else math.inf
    if hint is int:
        low, high = max(low, -INT64), min(high, INT64 - 1)
    within = f"within {low:g}..{high:g}"

    def check(value: Any, where: str, reading: _Reading) -> Any:
        kind = type(value)
        if (kind is int or (kind is float and hint is float and value - value == 0.0)) and low <= value <= high:
            return value  # the common case first (x - x is nan for inf and nan)
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise DecodeError(where, f"expected {_wanted(hint)}, got {json_name(value)}", value)
        if isinstance(value, float) and not math.isfinite(value):
            raise DecodeError(where, f"{value} is no finite number", value)
        if hint is int and isinstance(value, float):
            if not value.is_integer():
                raise DecodeError(where, f"expected an integer, got {value}", value)
            value = int(value) if low <= value <= high else value
        if not low <= value <= high:
            raise DecodeError(where, f"{shown(value)} is not {within}", value)
        return value
    return check


def decode(cls: type[T], data: Any, skip: Collection[str] = (), where: str = "$") -> T:
    """The dataclass `cls` from a JSON object; DecodeError names the first field that does not fit."""
    return _decode(cls, data, where, _Reading(skip))


def decode_lenient(cls: type[T], data: Any, skip: Collection[str] = (), where: str = "$") -> tuple[T, list[DecodeError]]:
    """The dataclass `cls` from a JSON object, every field that does not fit (nested ones too) left at its
    default and listed; DecodeError only when `data` is no object or a field with no default is missing."""
    reading = _Reading(skip, [])
    obj = _decode(cls, data, where, reading)
    return obj, reading.wrong or []


@dataclass(frozen=True)
class _Plan:
    """How one dataclass is read: a check per field, the fields that must be there, whether it keeps `extra`."""
    checks: dict[str, Check]
    required: tuple[str, ...]
    names: frozenset[str]
    extra: bool


@functools.cache
def _plan(cls: type) -> _Plan:
    hints = _hints(cls)
    fields = [f for f in dataclasses.fields(cls) if f.init]
    return _Plan(checks={f.name: _checker(hints[f.name]) for f in fields if f.name != "extra"},
                 required=tuple(f.name for f in fields if f.default is dataclasses.MISSING
                                and f.default_factory is dataclasses.MISSING),
                 names=frozenset(f.name for f in fields), extra=any(f.name == "extra" for f in fields))


def _decode(cls: type[T], data: Any, where: str, reading: _Reading) -> T:
    if isinstance(data, cls):
        return data
    if not isinstance(data, dict):
        raise DecodeError(where, f"expected an object, got {json_name(data)}", data)
    plan = _plan(cls)  # type: ignore[arg-type]
    for name in plan.required:
        if name not in data:
            raise DecodeError(f"{where}.{name}", "missing")
    kwargs: dict[str, Any] = {}
    for name, value in data.items():  # in the JSON's order: a record's problem lists its fields as the file does
        check = plan.checks.get(name)
        if check is None or name in reading.skip:
            continue
        try:
            kwargs[name] = check(value, f"{where}.{name}", reading)
        except DecodeError as exc:
            if reading.wrong is None:
                raise
            reading.wrong.append(DecodeError(f"{where}.{name}", exc.why, value))
    if plan.extra:
        kwargs["extra"] = {k: v for k, v in data.items() if k not in plan.names}
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as exc:
        raise DecodeError(where, str(exc), data) from None
