"""Monitor under log load: N ranks each writing L lines/s for S seconds, watched by the real app.

    python tests/bench/monitor_load.py [--ranks 8] [--rate 2000] [--seconds 20] [--runs 3] [--naive]

Launches a real run (torchrun, gloo environment, a writer script per rank), opens it in Monitor
mode of the real app (headless, 160×48), and measures while it runs:
  - event-loop lag: a task asks to sleep 10 ms over and over; lag = how late it wakes (p50/p99/max);
  - the app process's peak RSS;
  - afterwards, that every line is in the log files and that the UI received every line.
--naive swaps the log pane for a `RichLog` written once per line (no cap): the baseline the design
is compared against. Prints one line per run and the medians. Not collected by pytest.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import psutil

WRITER = r'''
import os, sys, time
rank, rate, seconds = int(os.environ["RANK"]), int(sys.argv[1]), float(sys.argv[2])
batch = max(1, rate // 20)
n, start = 0, time.monotonic()
total = int(rate * seconds)
while n < total:
    lines = "".join(f"rank {rank} line {n + i:07d} loss 0.{(n + i) % 9973:04d} some text to make it ~80 chars\n"
                    for i in range(min(batch, total - n)))
    sys.stdout.write(lines); sys.stdout.flush()
    n += min(batch, total - n)
    ahead = n / rate - (time.monotonic() - start)
    if ahead > 0:
        time.sleep(ahead)
'''


async def one_run(args: argparse.Namespace, script: Path) -> dict[str, float]:
    from textual.widgets import RichLog

    from mgtutor.training.runs.launch.launcher import LaunchSpec, launch
    from mgtutor.tui.app import MgTutorApp
    from mgtutor.tui.screens.monitor import MonitorScreen, RunUpdate
    from mgtutor.tui.widgets.rank_logs import RankLogs, prefix

    class NaiveMonitor(MonitorScreen):
        """The baseline: every line is one RichLog.write, nothing is capped."""

        def on_mount(self) -> None:
            self.query_one(RankLogs).display = False
            self.query_one("#run-view").mount(RichLog(id="naive-log"))

        def on_run_update(self, message: RunUpdate) -> None:
            naive = self.query_one("#naive-log", RichLog)
            for rank, _stream, text in message.lines:
                naive.write(prefix(rank) + text)
            count, message.lines = len(message.lines), []
            super().on_run_update(message)
            self.lines_seen += count

    class BenchApp(MgTutorApp):
        CSS_PATH = str(Path(sys.modules[MgTutorApp.__module__].__file__).parent / "mgtutor.tcss")
        MODES = {**MgTutorApp.MODES, "monitor": NaiveMonitor if args.naive else MonitorScreen}

    run = launch(LaunchSpec(target=[str(script), str(args.rate), str(args.seconds)], nproc=args.ranks,
                            backend="gloo", label="monitor-load"))
    app = BenchApp()
    me = psutil.Process()
    lags: list[float] = []
    peak_rss = 0.0
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("m")
        screen = app.screen
        screen.attach(run.record, run)
        started = time.monotonic()
        while not (screen.state is not None and screen.state.done):
            before = time.perf_counter()
            await asyncio.sleep(0.01)
            lags.append(time.perf_counter() - before - 0.01)
            if len(lags) % 25 == 0:
                peak_rss = max(peak_rss, me.memory_info().rss / 2**20)
            if time.monotonic() - started > args.seconds * 6 + 60:
                raise SystemExit("the run did not end in time")
        await pilot.pause(0.5)
        peak_rss = max(peak_rss, me.memory_info().rss / 2**20)
        seen = screen.lines_seen
    expected = int(args.rate * args.seconds)
    complete = all(sum(1 for _ in run.record.rank_log(r, "stdout").open()) == expected for r in range(args.ranks))
    lags.sort()
    return {"p50_ms": 1000 * lags[len(lags) // 2], "p99_ms": 1000 * lags[int(len(lags) * 0.99)],
            "max_ms": 1000 * lags[-1], "peak_rss_mib": peak_rss, "files_complete": float(complete),
            "ui_lines": float(seen), "file_lines": float(expected * args.ranks)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--rate", type=int, default=2000, help="lines per second per rank")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--naive", action="store_true", help="RichLog.write per line instead of the design")
    args = parser.parse_args()
    os.environ.setdefault("MGTUTOR_NO_NVML", "1")
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["XDG_STATE_HOME"] = tmp  # the runs go away with the benchmark
        script = Path(tmp) / "writer.py"
        script.write_text(WRITER)
        results = []
        for index in range(args.runs):
            result = asyncio.run(one_run(args, script))
            results.append(result)
            print(f"run {index + 1}: " + "  ".join(f"{k}={v:.1f}" for k, v in result.items()), flush=True)
    print("median: " + "  ".join(f"{k}={statistics.median(r[k] for r in results):.1f}" for k in results[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
