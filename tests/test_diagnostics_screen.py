"""Diagnostics mode for real: the doctor (torch asked in a subprocess), a 2-rank gloo bench and the rendezvous
probe started from the screen, results shown live, saved, and shown at once by the next app. One walk in both
languages (issue 41): every tab in Chinese at 80×24 with nothing English left, then the same reports in English
after `h z d` (the doctor not run again), then a new app showing what was saved. The bench's and the probe's
ranks (real torch on gloo) are started by the stand-in torchrun: the screen is under test here; both through the
real torchrun: test_allreduce.py::test_gloo_bench_runs_two_ranks_and_validates_sums, test_rendezvous.py."""
from __future__ import annotations

import threading

import pytest
from textual.widgets import DataTable, Input, Static, TabbedContent

from mgtutor.diagnostics.doctor import saved, versions
from mgtutor.tui.app import MgTutorApp
from mgtutor.tui.screens.diagnostics import DiagnosticsScreen
from mgtutor.tui.widgets.bandwidth_chart import BandwidthChart
from tests.helpers import wait_for_app
from tests.test_i18n_tui import footer_uncut, in_chinese  # noqa: F401  (a fixture)
from tests.test_zh_every_mode import no_english, settle

pytestmark = pytest.mark.integration  # the doctor's torch child, a 2-rank bench and a 2-rank probe

BENCH_ARGS = "--nproc 2 --backend gloo -b 8 -e 1K -f 128 --iters 2 --warmup 1 --check"


def text_of(screen, selector: str) -> str:
    return str(screen.query_one(selector, Static).render())


async def test_doctor_bench_and_probe_from_the_screen_in_chinese_then_english(in_chinese, monkeypatch,
                                                                             standin_torchrun):
    app = MgTutorApp()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("d")
        screen = app.screen
        assert isinstance(screen, DiagnosticsScreen)
        # the doctor runs on open, in a worker: no key needed
        await wait_for_app(pilot, lambda: screen.doctor_report is not None and "doctor" not in screen.busy, 240,
                           what="the doctor report")
        assert screen.title == "诊断"
        checks = text_of(screen, "#doctor-checks")
        assert "没有 NVIDIA GPU" in checks and "gloo 通信后端可用" in checks and "解决：" in checks
        assert "检查 - y 复制报告" in text_of(screen, "#doctor-status")
        tabs = screen.query_one("#diag-tabs", TabbedContent)
        assert [str(tabs.get_tab(pane).label) for pane in ("tab-doctor", "tab-bench", "tab-probe")] == \
            ["体检", "全归约", "汇合"]
        footer_uncut(screen)
        report = screen.doctor_report
        host = (report.get("host") or {}).get("os") or "?"  # the OS's own name and kernel
        await pilot.press("question_mark")
        await pilot.pause()
        assert "mgtutor 按键：诊断" in no_english(app.screen)
        await pilot.press("escape")
        await pilot.pause()
        for pane in ("tab-doctor", "tab-topology", "tab-bench", "tab-probe"):
            tabs.active = pane
            await pilot.pause()
            no_english(screen, allow=(host,))

        bench_args = screen.query_one("#bench-args", Input)
        bench_args.value = BENCH_ARGS
        tabs.active = "tab-bench"
        bench_args.focus()
        await pilot.press("enter")  # enter in the options runs it, as b does (b: the refusals below)
        await wait_for_app(pilot, lambda: screen.bench_report is not None, 240, what="the bench")
        await settle(pilot)
        bench = screen.bench_report
        assert bench["error"] is None, bench
        assert [r["bytes"] for r in bench["rows"]] == [8, 8, 1024, 1024]
        assert all(r["wrong"] == 0 for r in bench["rows"])
        table = screen.query_one("#bench-table", DataTable)
        assert table.row_count == 2 and table.get_row_at(1)[0] == "1K"
        assert len(screen.query_one("#bench-chart", BandwidthChart).points) == 2
        assert "非原地 busbw" in no_english(screen)
        assert "CPU 上的 gloo" in text_of(screen, "#bench-verdict")
        assert not app.active_runs[bench["run_id"]].running()

        screen.query_one("#probe-args", Input).value = "--nproc 2 --backend gloo --timeout 30"
        screen.set_focus(None)
        await pilot.press("p")
        await wait_for_app(pilot, lambda: screen.probe_report is not None, 240, what="the probe")
        await settle(pilot)
        no_english(screen)

        screen.set_focus(None)
        await pilot.press("h", "z", "d")  # back in English: the same report, said again
        await wait_for_app(pilot, lambda: "no NVIDIA GPU" in text_of(app.screen, "#doctor-checks"), 10,
                           what="the checklist in English")
        assert app.screen is screen and screen.doctor_report is report and screen.title == "Diagnostics"
        assert "checked" in text_of(screen, "#doctor-status")
        assert "NCCL" in text_of(screen, "#doctor-checks")  # versions line from the torch subprocess
        assert "No NVIDIA GPU" in text_of(screen, "#topology-view")
        table = screen.query_one("#bench-table", DataTable)
        assert table.row_count == 2 and table.get_row_at(1)[0] == "1K"
        assert "gloo on CPU" in text_of(screen, "#bench-verdict")  # the bench's verdict said again, in English
        assert "all 2 ranks joined" in text_of(screen, "#probe-message")

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

    # The next app shows the saved reports at once, while its own doctor runs. Torch's facts were asked of the
    # subprocess above; here they are given, held until the saved report has been seen.
    facts, asked = report["torch"], threading.Event()

    def gather() -> dict:
        asked.wait(60)
        return facts

    monkeypatch.setattr(versions, "gather", gather)
    again = MgTutorApp()
    async with again.run_test(size=(80, 24)) as pilot:
        await pilot.press("d")
        screen = again.screen
        await wait_for_app(pilot, lambda: screen.bench_report is not None and screen.doctor_report is not None, 20)
        await pilot.pause()
        assert screen.title == "Diagnostics"  # the choice made with z is kept
        assert screen.query_one("#bench-table", DataTable).row_count == 2
        assert "gloo on CPU" in text_of(screen, "#bench-verdict")  # the saved report's English verdict
        assert "saved report" in text_of(screen, "#doctor-status") and "doctor" in screen.busy
        asked.set()
        await wait_for_app(pilot, lambda: "doctor" not in screen.busy, 60)
        assert "checked" in text_of(screen, "#doctor-status")
        asked.clear()
        await pilot.press("c")  # c checks again
        assert "doctor" in screen.busy
        asked.set()
        await wait_for_app(pilot, lambda: "doctor" not in screen.busy, 60)
