"""The JSON contracts of `mgtutor doctor --json` and `mgtutor bench allreduce --json`, and a small
validator for the subset of JSON Schema they use (type, required, properties, items, enum), so
scripts and tests can check output without an extra dependency."""
from __future__ import annotations

import json
from importlib import resources
from typing import Any

from mgtutor.training.foundation.json_decode import DecodeError, fit, json_name

# JSON Schema's type names as the one decoder's types (training/foundation/json_decode.py): the same
# rules as events and records (an integer is never a bool; a number is finite)
_HINTS: dict[str, Any] = {"object": dict[str, Any], "array": list[Any], "string": str, "boolean": bool,
                          "integer": int, "number": float, "null": None}


def load_schema(name: str) -> dict[str, Any]:
    """`doctor` or `allreduce`: the schema shipped as package data."""
    text = resources.files("mgtutor.diagnostics").joinpath(f"{name}_schema.json").read_text()
    return json.loads(text)


def _is(value: Any, type_name: str) -> bool:
    try:
        fit(value, _HINTS[type_name])
    except DecodeError:
        return False
    return True


def errors(value: Any, schema: dict[str, Any], where: str = "$") -> list[str]:
    """Every way `value` breaks `schema`, as 'path: problem' lines; [] means valid."""
    found: list[str] = []
    types = schema.get("type")
    if types is not None:
        names = [types] if isinstance(types, str) else types
        if not any(_is(value, t) for t in names):
            return [f"{where}: expected {' or '.join(names)}, got {json_name(value)}"]
    if "enum" in schema and value not in schema["enum"]:
        found.append(f"{where}: {value!r} not one of {schema['enum']}")
    if isinstance(value, dict):
        for key in schema.get("required", []):
            if key not in value:
                found.append(f"{where}: missing {key!r}")
        for key, sub in schema.get("properties", {}).items():
            if key in value:
                found.extend(errors(value[key], sub, f"{where}.{key}"))
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            found.extend(errors(item, schema["items"], f"{where}[{i}]"))
    return found
