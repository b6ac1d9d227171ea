"""When the stall clock says "look now": silence before steps, a step gap after, once per quiet spell.

A real run directory (log files whose mtimes are set) and real event objects; no processes.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from mgtutor.training.runs.events.types import StepEvent
from mgtutor.training.runs.records.record import RunRecord
from mgtutor.training.runs.follow.stall import StallClock

T0 = 1_800_000_000.0


@dataclass
class Rank:
    pid: int | None = 1
    started: float | None = T0


@dataclass
class State:
    world_size: int = 2
    ranks: dict[int, Rank] = field(default_factory=lambda: {0: Rank(), 1: Rank()})


def record_with_logs(tmp_path: Path, written: float) -> RunRecord:
    (tmp_path / "logs").mkdir(parents=True)
    for rank in (0, 1):
        for stream in ("stdout", "stderr"):
            path = tmp_path / "logs" / f"rank{rank}.{stream}.log"
            path.write_text("x\n")
            os.utime(path, (written, written))
    return RunRecord(tmp_path)


def touch(record: RunRecord, when: float) -> None:
    path = record.rank_log(0, "stdout")
    os.utime(path, (when, when))


def test_silence_before_steps_is_reported_once_per_spell(tmp_path):
    record = record_with_logs(tmp_path, T0)
    clock = StallClock(record, quiet_s=5)
    assert clock.check(State(), T0 + 4) is None
    why = clock.check(State(), T0 + 6)
    assert why == "no output and no event from any rank for 6 s"
    assert clock.check(State(), T0 + 30) is None  # already said for this spell
    touch(record, T0 + 40)  # the ranks moved
    assert clock.check(State(), T0 + 41) is None
    assert clock.check(State(), T0 + 46) == "no output and no event from any rank for 6 s"


def test_not_stuck_asks_again_after_quiet_s(tmp_path):
    record = record_with_logs(tmp_path, T0)
    clock = StallClock(record, quiet_s=5)
    assert clock.check(State(), T0 + 6) is not None
    clock.not_stuck(T0 + 6)  # the stacks showed the ranks still importing torch
    assert clock.check(State(), T0 + 8) is None
    assert clock.check(State(), T0 + 11.5) == "no output and no event from any rank for 12 s"
    clock.not_stuck(T0 + 12)  # still no hang: the next look waits twice as long
    assert clock.check(State(), T0 + 21) is None
    assert clock.check(State(), T0 + 22.5) is not None


def test_nothing_before_every_rank_started(tmp_path):
    record = record_with_logs(tmp_path, T0)
    clock = StallClock(record, quiet_s=5)
    state = State(ranks={0: Rank(), 1: Rank(pid=None, started=None)})
    assert clock.check(state, T0 + 60) is None


def test_step_gap_uses_ten_times_the_median_with_a_floor(tmp_path):
    record = record_with_logs(tmp_path, T0)
    clock = StallClock(record, quiet_s=5)
    steps = [StepEvent(rank=r, t=T0 + i * 3.0, step=i) for i in range(5) for r in (0, 1)]
    steps += [StepEvent(rank=0, t=T0 + 15.0, step=5)]
    clock.observe(steps)
    # median gap 3 s: the limit is 30 s; rank 1's last step was at T0+12, rank 0's at T0+15
    assert clock.check(State(), T0 + 41) is None
    why = clock.check(State(), T0 + 43)
    assert why == "no step from rank 1 for 31 s (limit 30 s: 10 × the median step time, at least 20 s)"
    fast = StallClock(record_with_logs(tmp_path / "b", T0), quiet_s=5)
    fast.observe([StepEvent(rank=r, t=T0 + i * 0.1, step=i) for i in range(10) for r in (0, 1)])
    assert fast.check(State(), T0 + 15) is None  # 10 × 0.1 s is 1 s, but the floor is 20 s
    assert fast.check(State(), T0 + 21).startswith("no step from ranks 0, 1 for 20 s")


def test_lines_we_caused_do_not_end_the_spell(tmp_path):
    """Asking NCCL for a Flight Recorder dump makes every rank log a line; that is not progress."""
    record = record_with_logs(tmp_path, T0)
    clock = StallClock(record, quiet_s=5)
    assert clock.check(State(), T0 + 6) is not None
    clock.absorb(T0 + 12)
    touch(record, T0 + 10)  # the dump's own line
    assert clock.check(State(), T0 + 30) is None and clock.spell == T0
    touch(record, T0 + 40)  # a real line afterwards starts a new spell
    assert clock.check(State(), T0 + 41) is None and clock.spell == T0 + 40


def test_on_several_nodes_this_nodes_ranks_are_enough(tmp_path):
    record = record_with_logs(tmp_path, T0)
    (tmp_path / "meta.json").write_text('{"world_size": 4, "nnodes": 2, "nproc_per_node": 2}')
    clock = StallClock(record, quiet_s=5)
    assert clock.check(State(world_size=4), T0 + 6) == "no output and no event from any rank for 6 s"


def test_no_look_while_a_rank_compiles_until_the_compile_ends_or_runs_too_long(tmp_path):
    """A cold inductor compile is silent for a minute: looking there (a faulthandler dump from a signal
    without py-spy) crashed ranks on the H200, and it is no hang. The clock waits for the compile to end,
    or for `compile_quiet_s`."""
    from mgtutor.training.runs.events.types import CompileEvent

    def compile_event(phase: str, t: float) -> CompileEvent:
        return CompileEvent(rank=0, t=t, kind="compile", phase=phase, plan="default")

    record = record_with_logs(tmp_path, T0)
    clock = StallClock(record, quiet_s=5, compile_quiet_s=100)
    clock.observe([compile_event("began", T0)])
    assert clock.check(State(), T0 + 60) is None  # compiling: no look
    assert clock.check(State(), T0 + 101) == "no output and no event from any rank for 101 s"  # too long now

    ended = StallClock(record_with_logs(tmp_path / "b", T0), quiet_s=5, compile_quiet_s=100)
    ended.observe([compile_event("began", T0), compile_event("compiled", T0 + 40)])
    assert ended.check(State(), T0 + 44) is None  # the end of the compile was activity
    assert ended.check(State(), T0 + 46) == "no output and no event from any rank for 6 s"
