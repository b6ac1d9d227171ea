"""A run whose first failing rank died of a native crash inside the compiler (not in training).

The worker writes a `compile` step event with phase `began` before its first compiled step runs,
and `compiled` or `fell_back` after; a Python error there falls back in the rank itself. A crash of
the process (inductor's native threads have died of SIGSEGV) cannot be caught there, so the
launching side reads it from the events: the first failing rank died of a fatal signal with a
`began` and nothing after it. `mgtutor train` then runs again without compiling.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from mgtutor.training.runs.event_types import CompileEvent, Event
from mgtutor.training.runs.records import RunResult

NATIVE_CRASHES = frozenset({"SIGSEGV", "SIGABRT", "SIGBUS", "SIGILL", "SIGFPE"})


@dataclass(frozen=True)
class CompileCrash:
    rank: int
    signal: str
    plan: str


def compiling_ranks(events: Iterable[Event]) -> dict[int, str]:
    """Each rank whose last compile event is `began` (its compile never ended), with the plan's label."""
    last: dict[int, CompileEvent] = {}
    for event in events:
        if isinstance(event, CompileEvent) and event.rank is not None:
            last[event.rank] = event
    return {rank: e.plan for rank, e in last.items() if e.phase == "began"}


def crashed_while_compiling(result: RunResult, events: Iterable[Event]) -> CompileCrash | None:
    first = result.first_failure
    if first is None or first.rank is None or first.signal not in NATIVE_CRASHES:
        return None
    plan = compiling_ranks(events).get(first.rank)
    return None if plan is None else CompileCrash(rank=first.rank, signal=first.signal, plan=plan)
