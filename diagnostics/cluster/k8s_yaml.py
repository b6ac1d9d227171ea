"""YAML for Kubernetes with the reason for a field written above it, through ruamel.yaml.

Two things make a hand-written manifest go wrong, and both are handled here once:
- Kubernetes reads YAML 1.1, where `yes`, `on`, `no`, `0123` or `1:30` are not strings: any string
  that is not plainly a word is written in double quotes.
- ruamel places a comment above a key only at a column it is told: `Block` tracks the column of
  its keys as the document nests (2 per mapping, 4 for a mapping that is a list item).
"""
from __future__ import annotations

import io
import re
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.representer import RoundTripRepresenter

_PLAIN = re.compile(r"-*[A-Za-z_/][A-Za-z0-9_./:=-]*")  # a word, a path, a flag, key=value
_YAML11_WORDS = {"y", "n", "yes", "no", "on", "off", "true", "false", "null"}


class _QuotingRepresenter(RoundTripRepresenter):
    def represent_plain_or_quoted(self, data: str) -> Any:
        plain = bool(_PLAIN.fullmatch(data)) and data.lower() not in _YAML11_WORDS and not data.endswith(":")
        return self.represent_scalar("tag:yaml.org,2002:str", data, style=None if plain else '"')


_QuotingRepresenter.add_representer(str, _QuotingRepresenter.represent_plain_or_quoted)


class Block:
    """A mapping that knows the column of its keys, so a comment can be put above any of them."""

    def __init__(self, column: int = 0) -> None:
        self.map = CommentedMap()
        self.column = column

    def set(self, key: str, value: Any, why: str | None = None) -> Block:
        self.map[key] = value
        if why:
            self.map.yaml_set_comment_before_after_key(key, before=why, indent=self.column)
        return self

    def block(self, key: str, why: str | None = None) -> Block:
        child = Block(self.column + 2)
        self.set(key, child.map, why)
        return child

    def item(self, key: str, why: str | None = None, item_why: str | None = None) -> Block:
        """A new mapping appended to the list under key (the list is made on first use); why goes
        above the key, item_why above this item's dash."""
        if key not in self.map:
            self.set(key, CommentedSeq(), why)
        items = self.map[key]
        child = Block(self.column + 4)  # "- " sits 2 in from the key, the item's keys 2 further
        items.append(child.map)
        if item_why:
            items.yaml_set_comment_before_after_key(len(items) - 1, before=item_why, indent=self.column + 2)
        return child

    def header(self, text: str) -> None:
        self.map.yaml_set_start_comment(text)


def dump(document: CommentedMap) -> str:
    yaml = YAML()
    yaml.Representer = _QuotingRepresenter
    yaml.indent(mapping=2, sequence=4, offset=2)
    yaml.width = 4096  # long arguments stay on one line: a folded one is hard to read back
    out = io.StringIO()
    yaml.dump(document, out)
    return out.getvalue()


def load(text: str) -> Any:
    """The data of a YAML document as Kubernetes reads it: YAML 1.1, where an unquoted yes is true."""
    yaml = YAML(typ="safe", pure=True)
    yaml.version = (1, 1)
    return yaml.load(text)
