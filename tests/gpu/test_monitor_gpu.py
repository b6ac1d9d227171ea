"""Monitor mode on 2 real GPUs: the meters show both GPUs busy, each with the right rank on it.

    source tests/gpu/device_setup.sh && python3 -m pytest -m gpu tests/gpu/test_monitor_gpu.py -s

Prints what the meter rows showed while the run trained, and what 1 Hz sampling costs in CPU.
"""
from __future__ import annotations

import re
import time

import psutil

from mgtutor.diagnostics.meters import Sampler
from mgtutor.training.runs.launch.procs import run_processes
from mgtutor.tui.app import MgTutorApp
from mgtutor.tui.widgets.gpu_meters import GpuMeters
from tests.gpu.gpu_helpers import train_from_monitor
from tests.helpers import wait_for_app

UTIL = re.compile(r"(\d+)%")


async def test_meters_show_both_gpus_busy_with_their_ranks(two_gpus):
    app = MgTutorApp()
    async with app.run_test(size=(160, 48)) as pilot:
        screen = await train_from_monitor(pilot, nproc=2)
        meters = screen.query_one(GpuMeters)
        seen: dict[str, set[int]] = {"gpu0": set(), "gpu1": set()}
        busy_with_rank = {"gpu0": False, "gpu1": False}
        for _ in range(40):  # ~20 s of 1 Hz samples
            await pilot.pause(0.5)
            for key, expected in (("gpu0", "r0"), ("gpu1", "r1")):
                row = meters.rows.get(key, "")
                util = UTIL.search(row)
                if util:
                    seen[key].add(int(util.group(1)))
                if util and int(util.group(1)) > 0 and row.rstrip().endswith(expected):
                    busy_with_rank[key] = True
            if all(busy_with_rank.values()):
                break
        print("\nmeter rows:", *meters.rows.values(), sep="\n  ")
        print("utilisation seen:", {k: sorted(v) for k, v in seen.items()})
        print("state:", screen.query_one("#run-state").plain)
        print("charts:", screen.query_one("#training-charts").points, "points;",
              {r: s.throughput[-1] if s.throughput else None for r, s in screen.state.ranks.items()})
        assert busy_with_rank == {"gpu0": True, "gpu1": True}, meters.rows
        await pilot.press("s")
        await pilot.pause()
        await pilot.press("y")
        await wait_for_app(pilot, lambda: screen.state.done, 60, what="the stop")
        assert screen.state.phase == "stopped" and run_processes(screen.record.run_id) == []


def print_nvml_costs(sweeps: int = 10) -> None:
    """Where one sweep's time goes, per NVML function (thread CPU time and wall time)."""
    from collections import defaultdict

    from mgtutor.training.runs import nvml

    costs: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
    real_query = nvml.query

    def timed(fn, *args, **kwargs):
        cpu, wall = time.thread_time(), time.perf_counter()
        try:
            return real_query(fn, *args, **kwargs)
        finally:
            entry = costs[fn if isinstance(fn, str) else fn.__name__]
            entry[0] += time.thread_time() - cpu
            entry[1] += time.perf_counter() - wall
            entry[2] += 1

    nvml.query = timed
    try:
        sampler = Sampler(min_interval=0.0)
        for _ in range(sweeps):
            sampler.sample()
    finally:
        nvml.query = real_query
    for name, (cpu, wall, calls) in sorted(costs.items(), key=lambda kv: -kv[1][0]):
        print(f"  {name:<44} {calls:4d} calls  cpu {1000 * cpu / sweeps:7.2f} ms/sweep  wall {1000 * wall / sweeps:7.2f} ms/sweep")


def test_sampling_at_1hz_cpu_cost(two_gpus):
    """Prints the CPU cost of 1 Hz GPU+host sampling (the number goes in docs/benchmarks.md)."""
    sampler = Sampler(min_interval=1.0)
    me = psutil.Process()
    sampler.sample()
    before, wall = me.cpu_times(), time.monotonic()
    for _ in range(30):
        gpus, _host = sampler.sample(pids=[me.pid])
        time.sleep(1.0)
    after, wall = me.cpu_times(), time.monotonic() - wall
    cpu = (after.user - before.user) + (after.system - before.system)
    print(f"\n1 Hz sampling of {len(gpus.gpus)} GPUs: {cpu:.3f} s CPU in {wall:.1f} s = {100 * cpu / wall:.2f}% of one core")
    print_nvml_costs()
    assert len(gpus.gpus) >= 2 and sampler.sweeps >= 30
