"""Monitor's live alerts: a real 2-rank gloo run whose rank 1 is late to init_process_group is named
in the alert banner while rank 0 waits (short threshold set on the screen)."""
from __future__ import annotations

import asyncio

import pytest

from mgtutor.tui.widgets.run_state import AlertBanner
from tests.helpers import wait_for_app
from tests.monitor_helpers import make_app
from tests.test_monitor_live import SIZE, launch_from_form, open_form

pytestmark = [pytest.mark.integration, pytest.mark.slow]

LATE_RANK = r'''
import os, sys, time
if int(os.environ["RANK"]) == 1:
    time.sleep(float(sys.argv[1]))  # rank 1 is busy elsewhere, torch not yet imported; rank 0 waits
import torch.distributed as dist
dist.init_process_group("gloo")
dist.barrier()
dist.destroy_process_group()
'''


@pytest.fixture(autouse=True)
def no_nvml(monkeypatch):
    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")


async def test_rank_late_to_the_rendezvous_is_named_while_rank_0_waits(write_script):
    script = write_script("late_rank.py", LATE_RANK)
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        screen, form = await open_form(pilot, kind="script", script=str(script), script_args="120",
                                       nproc="2", backend="gloo")
        screen.rendezvous_after = 2.0
        await launch_from_form(pilot, form)
        banner = screen.query_one(AlertBanner)
        try:
            await wait_for_app(pilot, lambda: any(a.kind == "rendezvous_late" for a in banner.alerts), 90,
                               what="the rendezvous alert")
            alert = next(a for a in banner.alerts if a.kind == "rendezvous_late")
            assert alert.ranks == (1,), banner.plain
            assert banner.has_class("-visible")
            assert "rank 1 not at the rendezvous" in banner.plain and "rank 0 waits" in banner.plain
            assert not screen.state.done
        finally:
            await asyncio.to_thread(screen.run.stop, 3)
        await wait_for_app(pilot, lambda: screen.state.done, 60, what="the run to stop")
        await pilot.pause(0.2)
        assert not banner.has_class("-visible")  # a finished run carries no live alert
