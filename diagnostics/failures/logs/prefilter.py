"""Find, in a whole block of a log at once, the few places where a catalogue pattern can match.

Checking every line of a 200 MB log against ~90 patterns in Python takes about a minute; almost
every line is noise (steps, progress bars, NCCL INFO). So each pattern contributes "triggers":
lowercase literals that any line it matches must contain. All literal triggers go into ONE regex
shaped as a trie, run over the lowercased block by the C regex engine, and only the lines around
its matches are handed to the line scanner. Two things keep that regex fast:

- each trigger starts at the rarest character of its needle (RARITY, counted on real training
  logs), because the engine tests every byte against the set of first characters and only tries
  the branches at bytes in that set;
- the trie form (`c(?:uda e|ccl w)|…`) tries one branch per byte instead of every alternative.

A trigger that no literal can express (a case-insensitive regex, an alternation) is a separate
regex pass (`trigger_re`); it should start with a literal so the engine can search for it quickly.
"""
from __future__ import annotations

import re
from collections.abc import Iterable

# Printable ASCII from rarest to most common in training logs (lowercased): measured on the test
# logs plus a synthetic 200 MB DDP log. Upper case letters never occur in a lowercased block.
RARITY = "$&?@\\{}~+j!;'`qz^\">x)(_wv*y%bf<gkhm=|[5]8u6937p-dl/,c2:#4ani.os1rte0 "
TRIGGER_CHARS = 12  # longer triggers match fewer noise lines; the needle bounds it anyway
MIN_TRIGGER = 8


def _rarity(char: str) -> int:
    index = RARITY.find(char)
    return index if index >= 0 else 0  # not printable ASCII: rarer than anything listed


def trigger_of(needle: str) -> str:
    """The piece of a (lowercase) needle to look for: up to TRIGGER_CHARS from its rarest character
    (among the starts that leave MIN_TRIGGER characters). Any piece of a needle is a valid trigger."""
    # long needles keep MIN_TRIGGER characters (a short piece of a long message is often a common word);
    # a short needle may drop a few leading characters to start at a rarer one
    shortest = MIN_TRIGGER if len(needle) >= MIN_TRIGGER + 2 else min(len(needle), max(5, len(needle) - 3))
    starts = range(0, len(needle) - shortest + 1)
    best = min(starts, key=lambda i: (_rarity(needle[i]), i))
    return needle[best:best + TRIGGER_CHARS]


def minimal_literals(words: Iterable[str]) -> list[str]:
    """Drop a word that contains another word: wherever it occurs the shorter one occurs too."""
    unique = sorted(set(words), key=len)
    kept: list[str] = []
    for word in unique:
        if not any(other in word for other in kept):
            kept.append(word)
    return sorted(kept)


def trie_regex(words: Iterable[str]) -> str:
    """One regex source matching any of the words, with common prefixes factored out."""
    root: dict[str, dict] = {}
    for word in words:
        node = root
        for char in word:
            node = node.setdefault(char, {})
        node[""] = {}

    def build(node: dict[str, dict]) -> str:
        branches = [re.escape(char) + build(child) for char, child in sorted(node.items()) if char]
        if not branches:
            return ""
        optional = "" in node
        if len(branches) == 1 and not optional:
            return branches[0]
        return "(?:" + "|".join(branches) + ")" + ("?" if optional else "")

    return build(root)


class Prefilter:
    """Positions in a lowercased block where some trigger matches (sorted; several may fall in one line)."""

    def __init__(self, literals: Iterable[str], regexes: Iterable[str] = ()) -> None:
        words = minimal_literals(trigger_of(w) for w in literals if w)
        for word in words:
            if not word.isascii():  # the block is lowercased as bytes: only ASCII letters change case
                raise ValueError(f"trigger {word!r} is not ASCII")
        self.literals = words
        self._passes = [re.compile(trie_regex(words).encode())] if words else []
        self._passes += [re.compile(source.encode()) for source in dict.fromkeys(regexes)]

    def positions(self, lowered: bytes) -> list[int]:
        found: list[int] = []
        for regex in self._passes:
            found.extend(match.start() for match in regex.finditer(lowered))
        if len(self._passes) > 1:
            found.sort()
        return found
