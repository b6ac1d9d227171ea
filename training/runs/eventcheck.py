"""Failures that print no error and show only in our workers' events: NaN loss, a straggler, no sampler.

Used after a run (the classifier) and during one (training.watch). Each check returns
(kind, rank, fields for the summary, [(events.jsonl line number, line text)]).
"""
from __future__ import annotations

import json
import math
import os
import statistics
from collections.abc import Iterator
from pathlib import Path
from typing import Any

Check = tuple[str, "int | None", dict[str, Any], list[tuple[int, str]]]
STRAGGLER_FACTOR = 3.0
STRAGGLER_MIN_EXTRA_S = 0.05
MAX_EVENTS = 200_000


def numbered_events(path: str | os.PathLike[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, event) for each well-formed event; a missing or odd file yields nothing."""
    try:
        handle = Path(path).open("rb")
    except OSError:
        return
    with handle:
        for number, raw in enumerate(handle, 1):
            if number > MAX_EVENTS:
                return
            try:
                event = json.loads(raw)
            except (ValueError, UnicodeDecodeError):
                continue
            if isinstance(event, dict) and {"rank", "type"} <= event.keys():
                yield number, event


def _text(event: dict[str, Any]) -> str:
    return json.dumps(event, separators=(",", ":"))[:400]


def _finite(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def nan_loss(events: list[tuple[int, dict[str, Any]]]) -> list[Check]:
    for number, event in events:
        if event.get("type") in ("step", "epoch") and "loss" in event and event["loss"] is not None \
                and _finite(event["loss"]) is None:
            step = event.get("step", event.get("steps"))
            fields = {"value": str(event["loss"]), "step_text": f" at step {step}" if step is not None else ""}
            return [("nan_loss", event.get("rank"), fields, [(number, _text(event))])]
    return []


def same_data(events: list[tuple[int, dict[str, Any]]], min_steps: int = 2) -> list[Check]:
    """Every rank logging the very same loss at the same steps means every rank saw the same batches."""
    by_step: dict[Any, dict[int, tuple[float, int, dict[str, Any]]]] = {}
    for number, event in events:
        if event.get("type") == "step" and (loss := _finite(event.get("loss"))) is not None:
            by_step.setdefault(event.get("step"), {})[event.get("rank")] = (loss, number, event)
    shared = [s for s, ranks in by_step.items() if len(ranks) >= 2]
    if len(shared) < min_steps:
        return []
    if not all(len({v[0] for v in by_step[s].values()}) == 1 for s in shared):
        return []
    first = by_step[shared[0]]
    lines = [(v[1], _text(v[2])) for v in list(first.values())[:2]]
    steps = ", ".join(str(s) for s in shared[:3])
    return [("no_distributed_sampler", None, {"how_text": f" (every rank logged exactly the same loss at steps {steps})"},
             sorted(lines))]


def stragglers(events: list[tuple[int, dict[str, Any]]]) -> list[Check]:
    """A rank whose own per-step work (data_wait_s: time before it reaches the all-reduce) dwarfs the others'."""
    waits: dict[int, list[tuple[float, int, dict[str, Any]]]] = {}
    for number, event in events:
        if event.get("type") == "step" and (wait := _finite(event.get("data_wait_s"))) is not None:
            waits.setdefault(event.get("rank"), []).append((wait, number, event))
    if len(waits) < 2:
        return []
    means = {rank: statistics.fmean(w for w, _, _ in items) for rank, items in waits.items()}
    found: list[Check] = []
    for rank, mean in means.items():
        others = statistics.median(m for r, m in means.items() if r != rank)
        if mean > max(STRAGGLER_FACTOR * others, others + STRAGGLER_MIN_EXTRA_S):
            other_rank = next(r for r in waits if r != rank)
            text = (f"it spends {mean:.3f} s per step before reaching the gradient all-reduce, "
                    f"the other ranks {others:.3f} s")
            found.append(("straggler", rank, {"evidence_text": text},
                          [(waits[rank][-1][1], _text(waits[rank][-1][2])),
                           (waits[other_rank][-1][1], _text(waits[other_rank][-1][2]))]))
    return found


def check_all(events: list[tuple[int, dict[str, Any]]]) -> list[Check]:
    return nan_loss(events) + same_data(events) + stragglers(events)
