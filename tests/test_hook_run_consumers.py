"""Everything that reads step events, on the record of a real hook-measured run (issue 43, item 2): a plain
DDP script with no mgtutor import under `mgtutor run --nproc 2` (the shared `plain_ddp_run`, once per
worker). The Monitor draws its charts and each rank's progress (never "waiting for the first step" once
it has finished), `mgtutor report` draws the step charts of both ranks, `runs show` says each rank's last
step. Each test works on its own copy of the record (the Monitor and the report write into it)."""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from mgtutor.training.runs.records.record import runs_root
from mgtutor.tui.cli import main as cli_main

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("plain_ddp")]  # the shared real run


@pytest.fixture
def hook_record(plain_ddp_run, monkeypatch) -> Path:
    """This test's copy of the real run's record, in its own runs folder."""
    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")
    runs_root().mkdir(parents=True, exist_ok=True)
    return Path(shutil.copytree(plain_ddp_run.record, runs_root() / plain_ddp_run.record.name))


async def test_the_monitor_draws_a_finished_hook_runs_charts_and_each_ranks_progress(hook_record):
    from tests.helpers import wait_for_app
    from tests.monitor_helpers import make_app
    from tests.test_runs_screen import open_in_monitor

    app = make_app()
    async with app.run_test(size=(100, 40)) as pilot:
        screen = await open_in_monitor(pilot, hook_record.name)
        await wait_for_app(pilot, lambda: screen.state is not None and screen.state.done, 30, what="the replay")
        await pilot.pause(0.2)
        assert screen.state.phase == "finished"
        charts = screen.query_one("#training-charts")
        drawn = charts.render_charts(96).plain
        assert charts.points >= 4, drawn  # samples/s of step 1 and step 30, on both ranks
        assert "waiting for the first step" not in drawn and "no optimizer steps" not in drawn
        rows = {line.split()[0]: line for line in drawn.splitlines() if line.strip()}
        assert {"r0", "r1", "total", "loss"} <= set(rows), drawn
        for name in ("r0", "r1", "total"):
            assert re.search(r"[\d.]+k?/s\s*$", rows[name]), rows[name]  # the last samples/s
        assert re.search(r"\d\.\d+ @30", rows["loss"]), rows["loss"]  # the last loss, at the last step
        progress = screen.query_one("#run-state").plain
        assert "step 30" in progress and "r0 ok @30" in progress and "r1 ok @30" in progress, progress


def test_report_draws_both_ranks_step_charts(hook_record, tmp_path, capsys):
    out = tmp_path / "report.html"
    assert cli_main(["report", hook_record.name, "--doctor", "none", "-o", str(out)]) == 0
    html = out.read_text()
    assert "no step events" not in html
    for key in ("throughput", "loss", "step_time", "data_wait", "gpu_memory"):
        figure = re.search(rf'<figure class="chart" id="chart-{key}">(.*?)</figure>', html, re.S)
        assert figure, f"no {key} chart"
        assert 'id="series-rank-0"' in figure.group(1) and 'id="series-rank-1"' in figure.group(1), key


def test_runs_show_says_each_ranks_last_step(hook_record, capsys):
    assert cli_main(["runs", "show", hook_record.name]) == 0
    shown = capsys.readouterr().out
    assert "steps    each rank's last logged step, measured by the ranks' hook" in shown, shown
    for rank in (0, 1):
        line = next(line for line in shown.splitlines() if line.startswith(f"  rank {rank}: step "))
        assert re.fullmatch(rf"  rank {rank}: step 30, [\d.]+ [mµ]?s/step, data wait [\d.]+ [mµ]?s, [\d,]+ samples/s, "
                            r"loss \d\.\d+, peak memory [\d,]+ MiB", line), line
    assert cli_main(["runs", "show", hook_record.name, "--json"]) == 0
    steps = json.loads(capsys.readouterr().out)["steps"]
    assert [(s["rank"], s["step"], s["origin"]) for s in steps] == [(0, 30, "hook"), (1, 30, "hook")]
    assert all(s["step_s"] > 0 and s["samples_per_s"] > 0 and "data_wait_s" in s and "loss" in s for s in steps)
