"""Babel's extractor for the user-facing fields of mgtutor's JSON data (lesson.json, the failure catalogue,
check's rules.json).

The data files keep their English; the code that loads them passes those fields through `_()`,
so their translations live in the one gettext catalogue with everything else (babel.cfg names
this function for `*.json`). Keys that are identifiers, patterns or numbers are never extracted.
A file may name its own fields in its babel.cfg section, `keys = title why fix` (check's rules.json:
`why` is no TEXT_KEYS key, since lesson 15's checks use it to name a key of the record).
"""
from __future__ import annotations

import json
from collections.abc import Iterator
from typing import IO, Any

# The fields a person reads, in every JSON file the catalogue covers.
TEXT_KEYS = frozenset({"title", "goal", "says", "task", "hints", "summary", "fix"})


def json_texts(data: Any, key: str | None = None, keys: frozenset[str] = TEXT_KEYS) -> Iterator[str]:
    """Every string under one of `keys` (a list of strings counts: hints), depth first, in file order."""
    if isinstance(data, dict):
        for name, value in data.items():
            yield from json_texts(value, name, keys)
    elif isinstance(data, list):
        for item in data:
            yield from json_texts(item, key, keys)
    elif isinstance(data, str) and key in keys and data:
        yield data


def extract_json(fileobj: IO[bytes], keywords: Any, comment_tags: Any,
                 options: Any) -> Iterator[tuple[int, str | None, str, list[str]]]:
    """Babel's extraction-method protocol: (line number, function name, message, comments); the option
    `keys` (babel.cfg) names the fields to take instead of TEXT_KEYS."""
    keys = frozenset(options["keys"].split()) if options and options.get("keys") else TEXT_KEYS
    text = fileobj.read().decode("utf-8")
    lines = text.splitlines()
    for message in json_texts(json.loads(text), keys=keys):
        encoded = json.dumps(message, ensure_ascii=False)[1:-1]
        lineno = next((n for n, line in enumerate(lines, start=1) if encoded in line), 1)
        yield lineno, None, message, []
