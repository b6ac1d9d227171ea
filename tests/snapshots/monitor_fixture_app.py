"""The app showing a pre-written run mid-training, with fixed clock and fixed GPU readings, so the
monitor's layout can be snapshotted. The readings stand in for NVML on a 2× H200 machine."""
from __future__ import annotations

from pathlib import Path

from mgtutor.diagnostics.meters import GpuProcess, GpuSample, GpuSnapshot, HostSnapshot, ProcessStats
from mgtutor.training.runs.records.record import RunRecord
from mgtutor.tui import app as app_module
from mgtutor.tui.app import MgTutorApp
from mgtutor.tui.screens.monitor import MonitorScreen
from mgtutor.tui.widgets.gpu_meters import GpuMeters
from mgtutor.tui.widgets.rank_logs import RankLogs

FIXTURE = Path(__file__).parent.parent / "data" / "monitor_runs" / "20260101-000000-train-tinycnn-f1x7"
T0 = 1767225600.0
# A line as wide as the trainer's: at 80 columns it wraps, nothing of it is cut (issue 27 item 11)
TRAINER_LINE = "step     60/100000  epoch 0  loss 0.2087       1,274 samples/s/rank  data wait   1%  mem 689/689 MiB"


def fixed_sample(tick: int = 0) -> tuple[GpuSample, HostSnapshot]:
    gpus = [GpuSnapshot(index=i, name="NVIDIA H200", uuid=f"GPU-{i}", utilization_pct=(97, 71)[i] - (tick * 7 + i * 3) % 20,
                        memory_used_mib=(41200, 40800)[i], memory_total_mib=143771, power_w=(612.0, 455.0)[i],
                        power_limit_w=700.0, temperature_c=(58, 52)[i], sm_clock_mhz=1980, pcie_tx_kbps=None,
                        pcie_rx_kbps=None, nvlink_links_up=18, processes=[GpuProcess(4242 + i, 40000)])
            for i in (0, 1)]
    host = HostSnapshot(t=T0, cpu_percent_per_core=[50.0] * 16, ram_used_mib=20480, ram_total_mib=131072,
                        processes={4242: ProcessStats(4242, 101.0, 2048.0), 4243: ProcessStats(4243, 99.0, 2040.0)})
    return GpuSample(t=T0, gpus=gpus), host


class FixedSampler:
    def sample(self, pids=()):
        return fixed_sample()


class FixtureMonitor(MonitorScreen):
    clock = staticmethod(lambda: T0 + 42.0)
    make_sampler = staticmethod(FixedSampler)


class FixtureApp(MgTutorApp):
    CSS_PATH = str(Path(app_module.__file__).parent / MgTutorApp.CSS_PATH)  # relative paths follow the subclass
    MODES = {**MgTutorApp.MODES, "monitor": FixtureMonitor}


async def show_fixture_run(pilot) -> None:
    """Open Monitor mode on the fixture run and wait until everything is drawn, then freeze it."""
    from tests.helpers import wait_for_app

    await pilot.press("m")
    screen = pilot.app.screen
    screen.attach(RunRecord(FIXTURE), alive=lambda: True)
    await wait_for_app(pilot, lambda: screen.state is not None and screen.query_one("#training-charts").points == 120
                       and screen.query_one(GpuMeters).rows, 30, what="the fixture run on screen")
    screen.workers.cancel_group(screen, "monitor-watch")
    await pilot.pause(0.2)
    screen.query_one(RankLogs).add_lines([(0, "stdout", TRAINER_LINE)])
    meters = screen.query_one(GpuMeters)
    meters.history.clear()
    for tick in range(90):  # a minute and a half of readings, always the same ones
        meters.show(*fixed_sample(tick), screen.state.pids(), screen.state.backend)
    await pilot.pause()
    screen.query_one("#rank-log").scroll_end(animate=False, immediate=True)  # lines may land before its size
    await pilot.pause()
