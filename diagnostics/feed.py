"""The run feed (training/runs/follow/feed.py) with what only this layer has: the hang watch, the meters
and the classifier. `mgtutor run`, `runs attach` and the Monitor open their feed here.

    feed = open_feed(record, run, watch=Watch(...))     # RunFeed(record, run, watch=…, parts=PARTS)
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any

from mgtutor.diagnostics.failures.hang.watch import HangWatch, diagnose_with_hangs
from mgtutor.diagnostics.meters import Sampler
from mgtutor.training.runs.follow.detectors import Detector
from mgtutor.training.runs.follow.feed import FeedParts, Meters, RunFeed
from mgtutor.training.runs.launch.launcher import Run
from mgtutor.training.runs.records.record import RunRecord


def hang_watch(record: RunRecord, quiet_s: float, stop_on_hang: bool) -> Detector:
    return HangWatch(record, quiet_s=quiet_s, stop_on_hang=stop_on_hang)


def sampler() -> Meters:
    return Sampler(min_interval=1.0)


PARTS = FeedParts(diagnose=diagnose_with_hangs, hang_watch=hang_watch, meters=sampler)


def open_feed(record: RunRecord, run: Run | None = None, *, meters: Any = None, **options: Any) -> RunFeed:
    """A RunFeed with this layer's parts; `meters`: another way to make the sampler (a test's fixed one)."""
    parts = PARTS if meters is None else replace(PARTS, meters=meters)
    return RunFeed(record, run, parts=parts, **options)
