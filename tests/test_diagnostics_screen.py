"""Diagnostics mode for real: the doctor (torch asked in a subprocess) and a 2-rank gloo bench
started from the screen, results shown live, saved, and shown at once by the next app."""
from __future__ import annotations

import pytest
from textual.widgets import DataTable, Input, Static

from mgtutor.diagnostics.doctor import saved
from mgtutor.tui.app import MgTutorApp
from mgtutor.tui.screens.diagnostics import DiagnosticsScreen
from mgtutor.tui.widgets.bandwidth_chart import BandwidthChart
from tests.helpers import wait_for_app

pytestmark = pytest.mark.integration  # the doctor's torch child and a 2-rank torchrun

BENCH_ARGS = "--nproc 2 --backend gloo -b 8 -e 1K -f 128 --iters 2 --warmup 1 --check"


def text_of(screen, selector: str) -> str:
    return str(screen.query_one(selector, Static).render())


async def test_doctor_and_gloo_bench_from_the_screen(monkeypatch):
    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")
    app = MgTutorApp()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("d")
        screen = app.screen
        assert isinstance(screen, DiagnosticsScreen)
        # the doctor runs on open, in a worker: no key needed
        await wait_for_app(pilot, lambda: screen.doctor_report is not None and "doctor" not in screen.busy, 240)
        await pilot.pause()
        assert "checked" in text_of(screen, "#doctor-status")
        assert "no NVIDIA GPU" in text_of(screen, "#doctor-checks")
        assert "NCCL" in text_of(screen, "#doctor-checks")  # versions line from the torch subprocess
        assert "No NVIDIA GPU" in text_of(screen, "#topology-view")

        await pilot.press("y")  # a report a maintainer can paste as is
        copied = saved.saved_path("doctor").with_suffix(".md").read_text()
        assert copied.startswith("### mgtutor doctor") and "Host: " in copied and "torch==" in copied

        bench_args = screen.query_one("#bench-args", Input)
        for bad, says in (("-f 1", "-f must be more than 1"), ("--nproc", "--nproc needs a value"),
                          ("--bogus 3", "unknown option '--bogus'")):
            bench_args.value = bad  # the CLI's own option group, checked without argparse: one line, inline
            screen.set_focus(None)
            await pilot.press("b")
            assert says in text_of(screen, "#bench-status") and "bench" not in screen.busy
        bench_args.value = BENCH_ARGS
        screen.query_one("#diag-tabs").active = "tab-bench"
        bench_args.focus()
        await pilot.press("enter")
        await wait_for_app(pilot, lambda: screen.bench_report is not None, 240)
        await pilot.pause()
        report = screen.bench_report
        assert report["error"] is None, report
        assert [r["bytes"] for r in report["rows"]] == [8, 8, 1024, 1024]
        assert all(r["wrong"] == 0 for r in report["rows"])
        table = screen.query_one("#bench-table", DataTable)
        assert table.row_count == 2 and table.get_row_at(1)[0] == "1K"
        assert len(screen.query_one("#bench-chart", BandwidthChart).points) == 2
        assert "gloo on CPU" in text_of(screen, "#bench-verdict")
        run = app.active_runs[report["run_id"]]
        assert not run.running()

    again = MgTutorApp()
    async with again.run_test(size=(80, 24)) as pilot:
        await pilot.press("d")
        screen = again.screen
        await wait_for_app(pilot, lambda: screen.bench_report is not None and screen.doctor_report is not None, 20)
        await pilot.pause()
        assert screen.query_one("#bench-table", DataTable).row_count == 2
        assert "saved report" in text_of(screen, "#doctor-status") or "checked" in text_of(screen, "#doctor-status")
        await wait_for_app(pilot, lambda: "doctor" not in screen.busy, 240)
        await pilot.press("c")  # c checks again
        assert "doctor" in screen.busy
        await wait_for_app(pilot, lambda: "doctor" not in screen.busy, 240)
