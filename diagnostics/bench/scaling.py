"""The scaling report: the same training on 1, 2, …, N devices, against the honest baseline.

Efficiency is throughput_N ÷ (N × throughput of ONE device WITHOUT any DDP wrapper): the number a
user compares against, since DDP's own overhead on one device is part of what scaling costs.
Headless and torch-free: every measurement is a real launch through the launcher.
"""
from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mgtutor.training.runs.events.types import Event, EventType
from mgtutor.training.runs.launch.launcher import LaunchSpec, Run, launch
from mgtutor.training.runs.records.record import RunStatus
from mgtutor.training.runs.follow.session import RunSession
from mgtutor.training.runs.follow.summary import summarize
from mgtutor.training.foundation.i18n import _

WORKER = ["-m", "mgtutor.training.worker.train"]


class ScalingError(Exception):
    """A point whose run failed: the message names its run record."""


@dataclass
class Point:
    world_size: int
    strategy: str
    samples_per_s: float
    step_s: float | None
    data_wait_s: float | None
    compute_s: float | None
    run_record: str
    efficiency: float | None = None
    speedup: float | None = None
    compile: str | None = None  # what the trainer's --compile chose (auto decides per run), and its cost
    compile_s: float | None = None

    def as_json(self) -> dict[str, Any]:
        return {"world_size": self.world_size, "strategy": self.strategy,
                "samples_per_s": round(self.samples_per_s, 1),
                "efficiency": None if self.efficiency is None else round(self.efficiency, 4),
                "speedup": None if self.speedup is None else round(self.speedup, 3),
                "step_ms": None if self.step_s is None else round(1000 * self.step_s, 3),
                "data_wait_ms": None if self.data_wait_s is None else round(1000 * self.data_wait_s, 3),
                "compute_comm_ms": None if self.compute_s is None else round(1000 * self.compute_s, 3),
                "compile": self.compile, "compile_s": self.compile_s, "run_record": self.run_record}


def measure(train_argv: list[str], world_size: int, strategy: str, backend: str,
            on_line: Callable[[int | None, str], None] | None = None, env: dict[str, str] | None = None) -> Point:
    """One real run; its throughput is the sum of every rank's own samples/s."""
    target = [*WORKER, *train_argv, "--strategy", strategy]
    run: Run = launch(LaunchSpec(target=target, nproc=world_size, backend=backend, env=dict(env or {}),
                                 label=f"scaling-{strategy}-{world_size}"))
    session = RunSession(run.record, run)
    events: list[Event] = []
    final = None
    try:
        for update in session.updates():
            events += update.events
            if on_line:
                for rank, _stream, line in update.lines:
                    on_line(rank, line)
            if update.final:
                final = update
    except BaseException:
        session.stop()
        raise
    assert final is not None and final.result is not None
    summary = summarize(events, world_size)
    if final.result.status != RunStatus.FINISHED or not summary.complete or summary.samples_per_s is None:
        errors = "; ".join(f"rank {r.rank}: {r.error}" for r in summary.ranks if r.error)
        raise ScalingError(_("the {ranks}-rank {strategy} run failed ({why}); see its record: {path}").format(
            ranks=world_size, strategy=strategy, why=errors or final.result.status, path=run.record.path))
    first = next((e.extra for e in events if e.type == EventType.RESULT and e.rank == 0), {})
    return Point(world_size, strategy, summary.samples_per_s, summary.mean("step_s"), summary.mean("data_wait_s"),
                 summary.mean("compute_s"), str(run.record.path), compile=first.get("compile"),
                 compile_s=first.get("compile_s"))


def rate_points(points: list[Point], baseline: float) -> list[Point]:
    for point in points:
        point.speedup = point.samples_per_s / baseline if baseline > 0 else None
        point.efficiency = point.samples_per_s / (point.world_size * baseline) if baseline > 0 else None
    return points


def shared_cores_note(backend: str, max_devices: int, cpus: int | None = None) -> str | None:
    """On CPU ranks, why N ranks give less than N×: they share this machine's cores, they add none."""
    if backend != "gloo" or max_devices < 2:
        return None
    cpus = cpus or os.cpu_count() or 1
    threads = max(1, cpus // max_devices)
    return _("the CPU ranks share this machine's {cpus} core(s) ({threads} thread(s) per rank in every run): "
             "{ranks} ranks add no hardware, so the speed-up shows DDP's cost on shared cores, not what more GPUs "
             "would give").format(cpus=cpus, threads=threads, ranks=max_devices)


def scaling_report(train_argv: list[str], max_devices: int, backend: str,
                   on_line: Callable[[int | None, str], None] | None = None,
                   on_point: Callable[[Point], None] | None = None) -> list[Point]:
    """1 device without DDP (the baseline), then DDP on 2…max_devices ranks.

    On CPU ranks a "device" is an equal share of the cores: every run gets the same threads per rank,
    or the 1-rank baseline would use all cores and the comparison would say nothing about DDP.
    """
    env = {}
    if backend == "gloo":
        env["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // max_devices))
    points = [measure(train_argv, 1, "single", backend, on_line, env)]
    if on_point:
        on_point(points[0])
    for world_size in range(2, max_devices + 1):
        points.append(measure(train_argv, world_size, "ddp", backend, on_line, env))
        if on_point:
            on_point(points[-1])
    return rate_points(points, points[0].samples_per_s)
