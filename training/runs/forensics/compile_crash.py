"""A run whose first failing rank died of a native crash inside the compiler (not in training).

The worker writes a `compile` step event with phase `began` before its first compiled step runs,
and `compiled` or `fell_back` after; a Python error there falls back in the rank itself. A crash of
the process (native code that dies of SIGSEGV) cannot be caught there, so the
launching side reads it from the events: the first failing rank died of a fatal signal with a
`began` and nothing after it. `mgtutor train` and the Monitor then run again without compiling.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from mgtutor.training.runs.events.types import CompileEvent, Event
from mgtutor.training.foundation.i18n import _
from mgtutor.training.runs.records.record import RunResult
from mgtutor.training.runs.launch.train_options import TRAINER_MODULE

NATIVE_CRASHES = frozenset({"SIGSEGV", "SIGABRT", "SIGBUS", "SIGILL", "SIGFPE"})


@dataclass(frozen=True)
class CompileCrash:
    rank: int
    signal: str
    plan: str

    def said(self, nnodes: int = 1) -> str:
        """What happened and what comes next: a run again here, or (one node of several cannot start
        the job alone: its peers would not join) the flag to start it with on every node."""
        if nnodes > 1:
            text = _("rank {rank} died of {signal} while inductor compiled its step ({plan}): a crash in the "
                     "compiler, not in training; start the job again with --compile off on every node")
        else:
            text = _("rank {rank} died of {signal} while inductor compiled its step ({plan}): a crash in the "
                     "compiler, not in training; training again without compiling (--compile off)")
        return text.format(rank=self.rank, signal=self.signal, plan=self.plan)


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


def without_compiling(target: list[str]) -> list[str] | None:
    """The built-in trainer's argv with `--compile off`; None when it already is off, or the target is
    a script of the user's (whose compiling mgtutor does not choose)."""
    if target[:2] != ["-m", TRAINER_MODULE]:
        return None
    argv = list(target)
    if "--compile" not in argv:
        return [*argv, "--compile", "off"]
    at = argv.index("--compile") + 1
    if at >= len(argv) or argv[at] == "off":
        return None
    argv[at] = "off"
    return argv
