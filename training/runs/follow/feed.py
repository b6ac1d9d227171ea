"""One followed run, composed once: what `mgtutor run`, `runs attach` and the Monitor show, each its own way.

    feed = RunFeed(record, run, watch=Watch(hang_after=5.0), parts=parts)   # parts: see below
    for update in feed.updates():            # the session's updates (training/runs/follow/session.py) …
        ...update.lines, update.state, update.new_alerts
        ...update.meters, update.node        # … plus what a view shows beside them, at most once a second
        if update.final: ...update.result, update.findings, update.compile_crash
    final = feed.stop(signum=signal.SIGINT)  # Ctrl+C: stop every rank, then drain

A feed builds every part of the follow from the record and the `Watch` (what to watch for): the
session, the live detectors (late rendezvous, straggler, silence), the hang watch with its stall clock,
the meters (recorded to samples.jsonl by the command that owns the run, and shown by a view that asks),
this node's part of a multi-node job, and at the end the diagnosis of a failed or lost run (the only one
a view shows; `mgtutor diagnose` reads any run) and whether the compiler killed it. Views construct none
of these; they print, draw, and decide what a signal or a key does.

The run layer cannot import the hang watch, the meters or the classifier (diagnostics sits above it):
`FeedParts` carries them in, bound once in diagnostics/feed.py.
A run that had ended before the feed began, followed for its new lines only (`from_start=False`: a late
attach), is not read again: its end comes at once, without its events (they were all read, a million of
them too, to say how a finished run ended).
Headless and torch-free.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, fields
from typing import Any, Protocol

from mgtutor.training.runs.events.reader import read_events
from mgtutor.training.runs.follow.detectors import Detector, RunWatch
from mgtutor.training.runs.follow.samples import EVERY_S, SampleRecorder
from mgtutor.training.runs.follow.session import Diagnose, RunSession, Update
from mgtutor.training.runs.forensics.compile_crash import CompileCrash, crashed_while_compiling
from mgtutor.training.runs.launch.launcher import Run
from mgtutor.training.runs.net.multinode import NodeState, node_state
from mgtutor.training.runs.records.record import RunRecord, RunResult, RunStatus

SHOWN_FAILURES = (RunStatus.FAILED, RunStatus.LOST)  # the runs whose diagnosis a view shows


@dataclass(frozen=True)
class Watch:
    """What a live run is watched for (`mgtutor run`'s flags; the Monitor's defaults). 0 s turns a warning off."""
    rendezvous_after: float = 30.0  # name the ranks missing at the rendezvous after this long
    silent_after: float = 120.0  # no output and no event for this long: possibly hung
    hang_after: float = 5.0  # the stall clock's quiet time before the hang watch takes the stacks
    stop_on_hang: bool = False
    record_samples: bool = True  # write samples.jsonl (the command or app that owns the run does)
    show_meters: bool = False  # a GPU/host sample on the updates, at most once a second (the Monitor's meters)
    nodes: bool = False  # this node's part of a multi-node job on the updates, at most once a second
    compile_crash: bool = False  # say whether a failed run died inside the compiler (a view that retries)


class Meters(Protocol):
    """diagnostics.meters.Sampler, or a test's stand-in (one that cannot `row` records nothing)."""

    def sample(self, pids: list[int]) -> Any: ...


@dataclass(frozen=True)
class FeedParts:
    """What only the layer above has: the classifier, the hang watch, the meters."""
    diagnose: Diagnose | None = None
    hang_watch: Callable[[RunRecord, float, bool], Detector] | None = None  # (record, quiet_s, stop_on_hang)
    meters: Callable[[], Meters] | None = None


@dataclass
class FeedUpdate(Update):
    """A session update, and what the feed adds beside it."""
    meters: Any = None  # the sampler's (GpuSample, HostSnapshot), when the watch shows meters
    node: NodeState | None = None  # this node of a multi-node job (None: one node, or not read this time)
    compile_crash: CompileCrash | None = None  # on the final update of a failed run the compiler killed

    @classmethod
    def of(cls, update: Update) -> FeedUpdate:
        return cls(**{f.name: getattr(update, f.name) for f in fields(Update)})

    @property
    def failed(self) -> bool:
        """The run failed or was lost (the runs a view diagnoses)."""
        return self.result is not None and self.result.status in SHOWN_FAILURES


class RunFeed:
    """Follows one run with every part a view shows; `watch=None`: lines, state and the end only."""

    def __init__(self, record: RunRecord, run: Run | None = None, *, watch: Watch | None = None,
                 parts: FeedParts = FeedParts(), alive: Callable[[], bool] | None = None,
                 clock: Callable[[], float] = time.time, verbose: bool = False, from_start: bool = True,
                 watcher: str | None = "mgtutor") -> None:
        self.record, self.run, self.watch, self.parts = record, run, watch, parts
        self.meters = parts.meters() if parts.meters and watch and (watch.record_samples or watch.show_meters) else None
        self.ended_before = not from_start and not (alive() if alive else _running(record, run))
        self.session = RunSession(record, run, detectors=self._detectors(), diagnose=self._diagnose,
                                  clock=clock, alive=alive, verbose=verbose, from_start=from_start,
                                  watcher=None if self.ended_before else watcher)
        self._meters_at = self._node_at = float("-inf")

    def _detectors(self) -> list[Detector]:
        watch, record = self.watch, self.record
        if watch is None:
            return []
        detectors: list[Detector] = [RunWatch(record, rendezvous_after=watch.rendezvous_after,
                                              silent_after=watch.silent_after)]
        if watch.record_samples and hasattr(self.meters, "row"):  # one NVML sweep a second for both uses
            detectors.append(SampleRecorder(record, self.meters.row))  # type: ignore[union-attr]
        if watch.hang_after and self.parts.hang_watch is not None:
            detectors.append(self.parts.hang_watch(record, watch.hang_after, watch.stop_on_hang))
        return detectors

    def _diagnose(self, record: RunRecord) -> list[Any]:
        if self.parts.diagnose is None or record.status() not in SHOWN_FAILURES:
            return []
        return list(self.parts.diagnose(record))

    @property
    def skipped_events(self) -> int:
        return self.session.skipped_events

    def updates(self) -> Iterator[FeedUpdate]:
        """The session's updates with the meters, the node and the compile crash beside them."""
        if self.ended_before:
            yield self.ended()
            return
        for update in self.session.updates():
            yield self._dress(update)

    def ended(self) -> FeedUpdate:
        """The end of a run that had ended before the feed began: its result and diagnosis, no drain."""
        result = self.record.result()
        findings, broke = [], None
        try:
            findings = self._diagnose(self.record)
        except Exception as exc:  # as the session: the run's own outcome matters more than a classifier bug
            broke = f"{type(exc).__name__}: {exc}"
        return self._dress(Update(final=True, result=result, findings=findings, diagnose_error=broke, alerts=[]))

    def stop(self, grace: float = 10.0, signum: int | None = None) -> FeedUpdate:
        """Stop every process of the run, then drain (the session's stop): the final update."""
        return self._dress(self.session.stop(grace=grace, signum=signum))

    def close(self) -> None:
        """Stop following, leave the run going."""
        self.session.close()

    def _dress(self, update: Update) -> FeedUpdate:
        out = FeedUpdate.of(update)
        now = time.monotonic()
        watch, state = self.watch, update.state
        if watch is not None and state is not None:
            if watch.show_meters and self.meters is not None and now - self._meters_at >= EVERY_S:
                self._meters_at = now
                out.meters = self.meters.sample(pids=list(state.pids()))
            if watch.nodes and (now - self._node_at >= EVERY_S or update.final):
                self._node_at = now
                out.node = node_of(self.record, state.phase if state.done else RunStatus.RUNNING)
        if update.final and watch is not None and watch.compile_crash and out.failed:
            out.compile_crash = compile_crash_of(self.record, update.result)
        return out


def _running(record: RunRecord, run: Run | None) -> bool:
    return run.running() if run is not None else record.status() == RunStatus.RUNNING


def node_of(record: RunRecord, status: str) -> NodeState | None:
    """This node's part of a multi-node run; None for a run on one node."""
    meta = record.meta()
    if meta.nnodes < 2:
        return None
    return node_state(meta, record.ranks(), status)


def compile_crash_of(record: RunRecord, result: RunResult | None) -> CompileCrash | None:
    """A crash inside inductor that ended the run (read from the events once, at the end, rather than
    keeping every event of a long run in memory for this)."""
    return crashed_while_compiling(result or record.result(), read_events(record.events_path))

