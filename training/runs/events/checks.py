"""Failures that print no error and show only in our workers' events: NaN loss, a straggler, no sampler.

Used after a run (the classifier) and during one (training.watch). Each check returns
(kind, rank, fields for the summary, [(events.jsonl line number, line text)]).
"""
from __future__ import annotations

import math
import os
import statistics
from collections.abc import Sequence
from typing import Any

from mgtutor.training.runs.events.reader import read_events
from mgtutor.training.runs.events.types import EpochEvent, Event, StepEvent
from mgtutor.training.foundation.i18n import N_
from mgtutor.training.foundation.said import Said, english, said_again

Check = tuple[str, "int | None", dict[str, Any], list[tuple[int, str]]]
STRAGGLER_FACTOR = 3.0
STRAGGLER_MIN_EXTRA_S = 0.05
MAX_EVENTS = 200_000  # lines of events.jsonl the classifier reads at most


def run_events(path: str | os.PathLike[str]) -> list[Event]:
    """The events a classifier looks at (each knows its line number); a missing file has none."""
    return read_events(path, max_lines=MAX_EVENTS)


def _finite(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def nan_loss(events: Sequence[Event]) -> list[Check]:
    for event in events:
        if isinstance(event, (StepEvent, EpochEvent)) and event.loss is not None and _finite(event.loss) is None:
            step = event.step if isinstance(event, StepEvent) else event.steps
            fields = {"value": str(event.loss), "step_text": english(AT_STEP, step=step) if step is not None else ""}
            return [("nan_loss", event.rank, fields, [(event.line, event.text())])]
    return []


def same_data(events: Sequence[Event], min_steps: int = 2) -> list[Check]:
    """Every rank logging the very same loss at the same steps means every rank saw the same batches."""
    by_step: dict[int, dict[int, tuple[float, StepEvent]]] = {}
    for event in events:
        if isinstance(event, StepEvent) and (loss := _finite(event.loss)) is not None:
            by_step.setdefault(event.step, {})[event.rank] = (loss, event)
    shared = [s for s, ranks in by_step.items() if len(ranks) >= 2]
    if len(shared) < min_steps:
        return []
    if not all(len({v[0] for v in by_step[s].values()}) == 1 for s in shared):
        return []
    first = by_step[shared[0]]
    lines = [(v[1].line, v[1].text()) for v in list(first.values())[:2]]
    steps = ", ".join(str(s) for s in shared[:3])
    return [("no_distributed_sampler", None, {"how_text": english(SAME_LOSS, steps=steps)},
             sorted(lines))]


# A finding's evidence: English Saids (the record's words), said again in the reader's language by said_fields.
AT_STEP = N_(" at step {step}")
SAME_LOSS = N_(" (every rank logged exactly the same loss at steps {steps})")
STRAGGLER_EVIDENCE = N_("it spends {mine} s per step before reaching the gradient all-reduce, the other ranks {others} s")


def stragglers(events: Sequence[Event]) -> list[Check]:
    """A rank whose own per-step work (data_wait_s: time before it reaches the all-reduce) dwarfs the others'."""
    waits: dict[int, list[tuple[float, StepEvent]]] = {}
    for event in events:
        if isinstance(event, StepEvent) and (wait := _finite(event.data_wait_s)) is not None:
            waits.setdefault(event.rank, []).append((wait, event))
    if len(waits) < 2:
        return []
    means = {rank: statistics.fmean(w for w, _ in items) for rank, items in waits.items()}
    found: list[Check] = []
    for rank, mean in means.items():
        others = statistics.median(m for r, m in means.items() if r != rank)
        if mean > max(STRAGGLER_FACTOR * others, others + STRAGGLER_MIN_EXTRA_S):
            other_rank = next(r for r in waits if r != rank)
            text = english(STRAGGLER_EVIDENCE, mine=f"{mean:.3f}", others=f"{others:.3f}")
            found.append(("straggler", rank, {"evidence_text": text},
                          [(waits[rank][-1][1].line, waits[rank][-1][1].text()),
                           (waits[other_rank][-1][1].line, waits[other_rank][-1][1].text())]))
    return found


def said_fields(fields: dict[str, str]) -> dict[str, str]:
    """A check's English fields in the language in force, for the catalogue's sentence they fill in."""
    return {name: said_again(value) if isinstance(value, Said) else value for name, value in fields.items()}


def check_all(events: Sequence[Event]) -> list[Check]:
    return nan_loss(events) + same_data(events) + stragglers(events)
