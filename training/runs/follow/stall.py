"""When have the ranks stopped moving? The cheap part of hang detection, polled once a second.

    stall = StallClock(record)
    stall.observe(events)                    # every new event (RunSession feeds them)
    if (why := stall.check(state, now)): ... # a sentence, once per quiet spell; None while the run moves

Two rules (issue: hang forensics):
- before any step event (and for scripts that emit none): no new log line and no event from any rank
  for `quiet_s` seconds, once every rank has started;
- once steps arrive: some rank's last step is older than max(`min_step_gap_s`, `step_factor` × its
  median time between steps).
While a rank compiles (the trainer's `compile` event `began`, and no `compiled` or `fell_back` yet) the
clock does not ask, for up to `compile_quiet_s`: a cold inductor compile is silent for a minute or more,
and a look there is not free. Without py-spy a look is faulthandler's all-thread dump from a signal
handler, which reads every thread's frames without the GIL; on an H200 it died of SIGSEGV in about one
cold compile in four, reading the autograd thread that compiled the backward (docs/benchmarks.md).
While the run moves this costs one stat() per rank log per poll. A check that turns out to be no
hang (the caller looked at the stacks: still importing, computing) calls `not_stuck()`, and the
clock asks again later while the silence lasts: `quiet_s`, then twice that, up to a minute.
A rank whose steps stopped while the others go on (their lines and events start a new spell every
second) is asked about as rarely: the same late ranks, still at the same last step, are named again
only `quiet_s` after the last time, then twice that, up to a minute (each look takes every rank's
stack; the live straggler alert names such a rank within seconds).
Headless and torch-free.
"""
from __future__ import annotations

import os
import statistics
from collections import deque
from collections.abc import Sequence
from typing import Any

from mgtutor.training.runs.events.types import CompileEvent, Event, StepEvent
from mgtutor.training.foundation.i18n import _, ngettext
from mgtutor.training.runs.records.record import RunRecord

QUIET_S = 5.0
MIN_STEP_GAP_S = 20.0
STEP_FACTOR = 10.0
RECENT = 50
MAX_WAIT_S = 60.0
COMPILE_QUIET_S = 900.0  # a compile still going after this long is looked at like any silence


class StallClock:
    def __init__(self, record: RunRecord, quiet_s: float = QUIET_S, min_step_gap_s: float = MIN_STEP_GAP_S,
                 step_factor: float = STEP_FACTOR, compile_quiet_s: float = COMPILE_QUIET_S) -> None:
        self.record = record
        self.compile_quiet_s = compile_quiet_s
        self._compiling: dict[int, float] = {}  # rank → when its compile began (until it ends)
        self.quiet_s = quiet_s
        self.min_step_gap_s = min_step_gap_s
        self.step_factor = step_factor
        self._steps: dict[int, deque[float]] = {}  # rank → times of its recent step events
        self._last_event = 0.0
        self._spell_start: float | None = None  # the activity time the current quiet spell began after
        self._reported = False
        self._next_check = 0.0
        self._wait = quiet_s  # after a look that found no hang; doubles while the spell lasts, up to MAX_WAIT_S
        self._absorb_until = 0.0  # log writes up to this time are ours (a Flight Recorder dump's own line)
        self._local: int | None = None  # ranks on this node when the run spans several nodes (0: one node)
        self._late: tuple[tuple[int, float], ...] = ()  # the late ranks last named, with their last step's time
        self._late_next = 0.0  # … named again no sooner than this, while they stay the same
        self._late_wait = quiet_s

    def observe(self, events: Sequence[Event]) -> None:
        for event in events:
            self._last_event = max(self._last_event, event.t)
            if isinstance(event, StepEvent):
                self._steps.setdefault(event.rank, deque(maxlen=RECENT)).append(event.t)
            elif isinstance(event, CompileEvent) and event.rank is not None:
                if event.phase == "began":
                    self._compiling[event.rank] = event.t
                else:
                    self._compiling.pop(event.rank, None)

    @property
    def spell(self) -> float | None:
        """When the current quiet spell began (the last activity seen); changes when the ranks move."""
        return self._spell_start

    def last_activity(self) -> float:
        mtimes = [_mtime(path) for _rank, _stream, path in self.record.rank_logs()]
        return max([m for m in mtimes if m] + [self._last_event, 0.0])

    def check(self, state: Any, now: float) -> str | None:
        """A sentence saying why the ranks look stuck, or None. Once per quiet spell unless `not_stuck()`."""
        activity = self.last_activity()
        if self._spell_start is not None and self._spell_start < activity <= self._absorb_until:
            activity = self._spell_start  # what we caused is not the ranks moving
        if self._spell_start is None or activity > self._spell_start:  # it moved: a new spell
            self._spell_start, self._reported, self._next_check, self._wait = activity, False, 0.0, self.quiet_s
        if self._reported or now < self._next_check or not self._all_started(state) or self._compiles(now):
            return None
        why = self._step_gap(now) if self._steps else self._silence(now, activity)
        if why is not None:
            self._reported = True
        return why

    def _same_late_again(self, late: list[tuple[int, float, float]], now: float) -> bool:
        """The same ranks late at the same last step as the last time they were named, sooner than the
        back-off allows (the others' progress makes a new spell every poll: without this, a stack
        capture a second for as long as one rank stays stopped)."""
        key = tuple((rank, self._steps[rank][-1]) for rank, _gap, _limit in late)
        if key == self._late and now < self._late_next:
            return True
        self._late_wait = self._late_wait * 2 if key == self._late else self.quiet_s
        self._late_wait = min(self._late_wait, MAX_WAIT_S)
        self._late, self._late_next = key, now + self._late_wait
        return False

    def absorb(self, until: float) -> None:
        """Log lines written until `until` were caused by us (asking NCCL for a dump logs a line in
        every rank): they neither end the quiet spell nor start a new one."""
        self._absorb_until = max(self._absorb_until, until)

    def not_stuck(self, now: float) -> None:
        """The caller found no hang in this spell (yet): look again later if it stays quiet, each time
        twice as late (a healthy run that prints rarely pays for a look less and less often)."""
        self._reported = False
        self._next_check = now + self._wait
        self._wait = min(self._wait * 2, MAX_WAIT_S)

    def _compiles(self, now: float) -> bool:
        """Some rank is inside its compile, begun less than `compile_quiet_s` ago."""
        return any(now - began < self.compile_quiet_s for began in self._compiling.values())

    def _silence(self, now: float, activity: float) -> str | None:
        quiet = now - activity if activity else 0.0
        if quiet < self.quiet_s:
            return None
        return _("no output and no event from any rank for {seconds:.0f} s").format(seconds=quiet)

    def _step_gap(self, now: float) -> str | None:
        late = []
        for rank, times in sorted(self._steps.items()):
            gaps = [b - a for a, b in zip(times, list(times)[1:]) if b > a]
            limit = max(self.min_step_gap_s, self.step_factor * statistics.median(gaps)) if gaps else self.min_step_gap_s
            if now - times[-1] >= limit:
                late.append((rank, now - times[-1], limit))
        if not late or self._same_late_again(late, now):
            return None
        rank, gap, limit = max(late, key=lambda item: item[1])
        names = ", ".join(str(r) for r, _g, _l in late)
        return ngettext("no step from rank {ranks} for {gap:.0f} s (limit {limit:.0f} s: 10 × the median step time, "
                        "at least {least:.0f} s)",
                        "no step from ranks {ranks} for {gap:.0f} s (limit {limit:.0f} s: 10 × the median step time, "
                        "at least {least:.0f} s)", len(late)).format(ranks=names, gap=gap, limit=limit,
                                                                     least=self.min_step_gap_s)

    def _all_started(self, state: Any) -> bool:
        """Every rank this node runs is up (on several nodes: this node's share of the world)."""
        ranks = getattr(state, "ranks", None) or {}
        world = int(getattr(state, "world_size", 0) or 0)
        if self._local is None:
            meta = self.record.meta()
            self._local = meta.nproc_per_node if meta.nnodes > 1 and meta.nproc_per_node else 0
        started = [r for r, s in ranks.items() if getattr(s, "pid", None) or getattr(s, "started", None)]
        return bool(started) and len(started) >= max(self._local or world, 1)


def _mtime(path: os.PathLike[str]) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0
