"""Load the failure catalogue (failure_catalogue.json): every kind's patterns, weight, summary, fix and lesson.

The catalogue is data so that a new message text is one line in the JSON, not a new `if`. Each
pattern gets a lowercase "needle" (its longest literal run) so a line is searched with a regex only
when the needle occurs in it, and "triggers": short pieces of the needle (or, where the regex has
no usable literal, the JSON's own `triggers` / `trigger_re`) that prefilter.py looks for in whole
blocks of a file, so that only the few lines that can match are read line by line.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any

_SPECIAL = set(".^$*+?{}[]|()")
_QUANTIFIERS = set("*?{+")


@dataclass(frozen=True)
class Pattern:
    regex: re.Pattern[str]
    needle: str | None  # lowercase; None: always try the regex
    evidence_only: bool = False
    summary: str | None = None  # overrides the kind's summary when this pattern matched first
    fix: str | None = None  # overrides the kind's fix the same way
    triggers: tuple[str, ...] = ()  # lowercase literals: a line that matches contains one of them
    trigger_res: tuple[str, ...] = ()  # regexes over the lowercased line, for what no literal pins down


@dataclass(frozen=True)
class KindSpec:
    kind: str
    weight: int
    cause: bool  # a root cause (may outrank others on the failing rank) or a symptom of another rank
    lesson: str
    summary: str
    fix: str
    patterns: tuple[Pattern, ...] = ()
    detail_map: dict[str, str] = field(default_factory=dict)
    absorbed_by: tuple[str, ...] = ()  # dropped when one of these kinds was found (they explain it)


def needle_of(source: str) -> str | None:
    """The longest literal run at group depth 0, lowercased; None when the regex has a top-level `|`."""
    source = re.sub(r"^\(\?[a-z]+\)", "", source)
    runs: list[str] = []
    current: list[str] = []
    depth = 0
    i = 0
    while i < len(source):
        char = source[i]
        literal: str | None = None
        if char == "\\" and i + 1 < len(source):
            nxt = source[i + 1]
            literal = nxt if not nxt.isalnum() else None
            i += 2
        elif char in "([":
            depth += 1 if char == "(" else 0
            if char == "[":  # skip a character class whole
                end = source.find("]", i + 2)
                i = len(source) if end < 0 else end + 1
            else:
                i += 1
            literal = None
        elif char == ")":
            depth -= 1
            i += 1
        elif char == "|" and depth == 0:
            return None
        else:
            literal = None if char in _SPECIAL else char
            i += 1
        if literal is not None and depth == 0 and not (i < len(source) and source[i] in _QUANTIFIERS):
            current.append(literal)
        else:
            if current:
                runs.append("".join(current))
            current = []
    if current:
        runs.append("".join(current))
    best = max(runs, key=len, default="")
    return best.lower() if len(best) >= 3 else None


def _pattern(entry: Any, evidence_only: bool) -> Pattern:
    if isinstance(entry, str):
        entry = {"re": entry}
    needle = needle_of(entry["re"])
    triggers = tuple(t.lower() for t in entry.get("triggers", ()))
    trigger_res = tuple(entry.get("trigger_re", ()))
    if not triggers and not trigger_res:
        if needle is None:
            raise ValueError(f"pattern {entry['re']!r} has no literal to look for: give it triggers or trigger_re")
        triggers = (needle,)  # the prefilter looks for its rarest piece
    return Pattern(re.compile(entry["re"]), needle, evidence_only, entry.get("summary"), entry.get("fix"),
                   triggers, trigger_res)


def parse_catalogue(data: dict[str, Any]) -> dict[str, KindSpec]:
    kinds: dict[str, KindSpec] = {}
    for item in data["kinds"]:
        patterns = [_pattern(p, False) for p in item.get("patterns", [])]
        patterns += [_pattern(p, True) for p in item.get("evidence_patterns", [])]
        kinds[item["kind"]] = KindSpec(
            kind=item["kind"], weight=int(item["weight"]), cause=bool(item.get("cause", True)),
            lesson=item["lesson"], summary=item["summary"], fix=item["fix"], patterns=tuple(patterns),
            detail_map=dict(item.get("detail_map", {})), absorbed_by=tuple(item.get("absorbed_by", ())))
    return kinds


@lru_cache(maxsize=1)
def load_catalogue() -> dict[str, KindSpec]:
    text = resources.files("mgtutor.diagnostics.failures").joinpath("failure_catalogue.json").read_text("utf-8")
    return parse_catalogue(json.loads(text))


KINDS = (
    "rendezvous_timeout", "rendezvous_unreachable", "port_in_use", "nccl_init_timeout", "cuda_oom",
    "host_oom_killed", "nccl_error", "duplicate_gpu", "collective_timeout", "watchdog_stuck",
    "ddp_unused_parameters", "process_group_not_initialized", "invalid_device_ordinal", "collective_mismatch",
    "cuda_driver_too_old", "no_cuda_driver", "nccl_without_gpu", "shm_exhausted", "dataloader_worker_killed",
    "no_distributed_sampler", "nan_loss", "straggler", "child_failed", "dataset_download_failed",
    "world_size_mismatch", "rank_outside_collective", "exit_abort", "hostname_unresolvable",
)
