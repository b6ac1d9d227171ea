"""Monitor mode end to end: real 2-rank gloo runs started from the form, watched to their end."""
from __future__ import annotations

import re

import pytest

from mgtutor.training.runs.launch.procs import run_processes
from mgtutor.training.runs.records.record import list_runs
from mgtutor.tui.screens.monitor import MonitorScreen
from mgtutor.tui.widgets.launch_form import LaunchForm
from mgtutor.tui.widgets.rank_logs import RankLogs
from tests.helpers import wait_for_app
from tests.monitor_helpers import EVENT_SCRIPT, make_app
from tests.test_i18n_tui import in_chinese  # noqa: F401  (a fixture)

pytestmark = pytest.mark.slow
SIZE = (110, 45)


@pytest.fixture(autouse=True)
def no_nvml(monkeypatch):
    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")  # this machine has no GPU; say so the same way every time


async def open_form(pilot, **values: str) -> tuple[MonitorScreen, LaunchForm]:
    await pilot.press("m")
    await pilot.pause()
    screen = pilot.app.screen
    assert isinstance(screen, MonitorScreen)
    form = screen.query_one(LaunchForm)
    for key, value in values.items():
        form.query_one(f"#f-{key.replace('_', '-')}").value = value
    await pilot.pause()
    return screen, form


async def launch_from_form(pilot, form: LaunchForm) -> None:
    form.query_one("#f-nproc").focus()
    await pilot.press("enter")


@pytest.mark.integration
async def test_builtin_trainer_runs_to_finished_from_the_form():
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        screen, form = await open_form(pilot, nproc="2", backend="gloo", steps="6", log_every="1", batch_size="16")
        assert "mgtutor run --nproc 2 --backend gloo -- -m mgtutor.training.worker.train" in str(
            form.query_one("#form-command").render())
        await launch_from_form(pilot, form)
        await wait_for_app(pilot, lambda: screen.state is not None and screen.state.done, 180, what="the run to end")
        await pilot.pause(0.3)
        state = screen.state
        assert state.phase == "finished", screen.query_one("#run-state").plain
        seen = state.phases_seen
        assert seen[0] == "starting" and seen[-2:] == ["training", "finished"]
        assert seen == [p for p in ("starting", "rendezvous", "training", "finished") if p in seen]
        assert all(r.joined is not None and r.last_step == 6 for r in state.ranks.values())
        logs = screen.query_one(RankLogs)
        assert logs.buffers["rank0"].total > 0  # the trainer logs on rank 0 only, as lesson 5 teaches
        for rank in (0, 1):  # every tab holds exactly what the rank wrote to its files
            on_disk = sum(len(screen.record.rank_log(rank, s).read_text().splitlines()) for s in ("stdout", "stderr")
                          if screen.record.rank_log(rank, s).exists())
            assert logs.buffers[f"rank{rank}"].total == on_disk
        assert screen.query_one("#training-charts").points == 12  # 6 steps × 2 ranks
        assert len(state.total_throughput) == 6
        assert "finished" in screen.query_one("#run-state").plain
        assert not screen.query_one("#failure-banner").has_class("-visible")
        assert app.active_runs and not app.running_runs()


@pytest.mark.integration
async def test_crash_on_rank_1_shows_the_banner_with_rank_and_exit_code(in_chinese):
    """The real trainer's injected crash on rank 1, one real torchrun run for both languages: launched from the
    form and watched to its end in Chinese at 80×24 (nothing English left but the rank's own words, the phases it
    went through), then the same record in English, the Monitor attached to it (the banner's words)."""
    from mgtutor.training.foundation.i18n import set_language
    from tests.monitor_helpers import attach_in_monitor
    from tests.test_zh_every_mode import RANK_WORDS, no_english, settle

    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        screen, form = await open_form(pilot, nproc="2", backend="gloo", steps="30", log_every="1",
                                       batch_size="16", inject="crash-rank", inject_rank="1")
        await launch_from_form(pilot, form)
        await wait_for_app(pilot, lambda: screen.state is not None and screen.state.done, 180, what="the run to end")
        await settle(pilot)
        text = no_english(screen, allow=RANK_WORDS)
        assert "失败" in text
        state_line = screen.query_one("#run-state").plain
        assert "启动中" in state_line and "失败" in state_line and "2 个 rank gloo" in state_line, state_line
        first = screen.record.result().first_failure
        assert first is not None and first.rank == 1 and first.exit_code not in (0, None)
        banner = screen.query_one("#failure-banner")
        assert banner.has_class("-visible") and "rank 1" in banner.plain
        if screen.finding is not None:
            assert "解决：" in banner.plain and f"(o：打开课程 {screen.finding.lesson})" in banner.plain, banner.plain
        logs = screen.query_one(RankLogs)
        await pilot.press("right_square_bracket", "right_square_bracket")  # all → rank 0 → rank 1
        assert logs.active == "rank1"
        await pilot.press("e")
        assert logs.buffers["rank1"].first_error is not None
        assert logs.log_view.auto_scroll is False  # jumped to the error: following stops
        assert any("injected crash" in line for line in logs.log_view.lines)
        record = screen.record

    set_language("en")
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        screen = await attach_in_monitor(pilot, record)
        await wait_for_app(pilot, lambda: screen.state is not None and screen.state.done, 60, what="the record read")
        await pilot.pause(0.3)
        banner = screen.query_one("#failure-banner")
        assert banner.has_class("-visible")
        assert re.search(rf"rank 1 failed first: exit code {first.exit_code}\b", banner.plain), banner.plain
        if screen.finding is not None:  # the classifier's top finding, with its fix and lesson key
            assert screen.finding.fix in banner.plain.replace("\n", " ") or "fix:" in banner.plain
            assert f"o: open lesson {screen.finding.lesson}" in banner.plain


@pytest.mark.integration
async def test_stop_asks_then_leaves_no_process(write_script, standin_torchrun):
    """The Monitor's stop, on a torch-free script's ranks under the stand-in torchrun (a stop through the real
    torchrun: test_run_control.py::test_sigterm_to_mgtutor_run_stops_every_rank_like_ctrl_c)."""
    script = write_script("events.py", EVENT_SCRIPT)
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        screen, form = await open_form(pilot, kind="script", script=str(script), script_args="5000",
                                       nproc="2", backend="gloo")
        await launch_from_form(pilot, form)
        await wait_for_app(pilot, lambda: screen.state is not None and screen.state.phase == "training", 120, what="training")
        assert "rendezvous" in screen.state.phases_seen  # the script holds the rendezvous for 0.3 s
        await pilot.press("s")
        await pilot.pause()
        await pilot.press("n")  # "keep running": nothing happens
        await pilot.pause(0.5)
        assert screen.run.running()
        await pilot.press("s")
        await pilot.pause()
        await pilot.press("y")
        await wait_for_app(pilot, lambda: screen.state.done, 60, what="the run to stop")
        assert screen.state.phase == "stopped"
        result = screen.record.result()
        assert result.status == "stopped" and result.stop is not None and result.stop.clean is True
        assert run_processes(screen.record.run_id) == []
        assert "stopped" in screen.query_one("#run-state").plain


@pytest.mark.integration
async def test_form_rejects_bad_values_without_launching(monkeypatch):
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        screen, form = await open_form(pilot, batch_size="many")
        await launch_from_form(pilot, form)
        await pilot.pause()
        assert "batch size must be a whole number" in str(form.query_one("#form-message").render())
        form.query_one("#f-batch-size").value = "32"
        form.query_one("#f-backend").value = "nccl"
        await launch_from_form(pilot, form)
        await wait_for_app(pilot, lambda: "nccl" in str(form.query_one("#form-message").render()), 30, what="the message")
        message = str(form.query_one("#form-message").render())
        assert "needs NVIDIA GPUs" in message and "gloo" in message
        assert list(list_runs()) == [] and screen.record is None
