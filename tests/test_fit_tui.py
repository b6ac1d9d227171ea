"""`mgtutor fit` from the TUI, in a real app (issue 43, item 3): the Monitor's OOM banner offers B, which takes
the run to Troubleshoot → Out of memory; there `b` runs the search on the newest run's own command, each
trial shown as it ends (real CPU ranks, GPU memory stood in for at the CUDA boundary only)."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from textual.widgets import Log, Static

from mgtutor.training.runs.records.record import RankExit, RunRecord
from mgtutor.training.runs.records.types import RunMeta, RunResult
from mgtutor.tui.screens.troubleshoot import TroubleshootScreen
from tests.helpers import open_symptom, wait_for_app
from tests.monitor_helpers import make_app

SCRIPT = Path(__file__).parent / "data" / "fit_ddp.py"
MIB, GIB = 1 << 20, 1 << 30
OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.10 GiB "
       "of which 1.00 GiB is free. Including non-PyTorch memory, this process has 78.00 GiB memory in use. Of the "
       "allocated memory 70.00 GiB is allocated by PyTorch, and 7.00 GiB is reserved by PyTorch but unallocated.\n")


def oom_record(nproc: int = 1) -> RunRecord:
    """A user script's run that ran out of memory on rank 0 before its first step."""
    record = RunRecord.create("fit-ddp-py")
    record.write_meta(RunMeta.from_json({"run_id": record.run_id, "label": "fit_ddp.py", "status": "failed",
                                         "target": [str(SCRIPT), "--batch-size", "160"], "cwd": os.getcwd(),
                                         "world_size": nproc, "nproc_per_node": nproc, "backend": "gloo",
                                         "started": 1.0, "ended": 2.0}))
    record.write_rank(RankExit(rank=0, local_rank=0, node_rank=0, world_size=nproc, pid=11, wrapper_pid=10, exit_code=1))
    record.rank_log(0, "stderr").write_text(OOM)
    record.write_result(RunResult.from_json({"status": "failed", "first_failure": {"rank": 0, "exit_code": 1},
                                             "ranks": [{"rank": 0, "exit_code": 1, "outcome": "failed"}],
                                             "duration_s": 1.0}))
    return record


@pytest.mark.integration
async def test_the_monitors_oom_banner_sends_the_run_to_troubleshoots_batch_search(monkeypatch) -> None:
    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")  # no GPU: the search says so, and starts nothing
    record = oom_record()
    app = make_app()
    async with app.run_test(size=(100, 40)) as pilot:
        await pilot.press("m")
        monitor = app.screen
        monitor.attach(RunRecord(record.path), alive=lambda: False)
        banner = monitor.query_one("#failure-banner")
        await wait_for_app(pilot, lambda: banner.kind == "cuda_oom", 60, what="the OOM diagnosis")
        assert "(B: find the batch that fits)" in banner.plain
        assert f"mgtutor fit --nproc 1 -- {os.path.relpath(SCRIPT)} --batch-size 160" in banner.plain.replace("\n", " ")
        await pilot.press("B")
        screen = await wait_for_app(pilot, lambda: isinstance(app.screen, TroubleshootScreen) and app.screen, 30,
                                    what="Troubleshoot")
        status = lambda: str(screen.query_one("#ts-status", Static).render())  # noqa: E731
        await wait_for_app(pilot, lambda: "no NVIDIA GPU was found" in status(), 30, what="the answer")
        assert screen.symptom is not None and screen.symptom.key == "oom" and not screen.busy


@pytest.mark.integration
async def test_troubleshoot_b_fits_the_newest_runs_own_script_with_every_trial_shown(monkeypatch,
                                                                                  standin_torchrun) -> None:
    """Every trial's ranks start through the stand-in torchrun: what is shown is the TUI's (the search itself
    under the real torchrun: test_fit_run.py)."""
    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")
    # 1 GiB fixed + 10 MiB a sample, 95 MiB over: batch 9 trains, 10 does not
    monkeypatch.setenv("MGTUTOR_FAKE_CUDA_MEMORY", json.dumps({"fixed": GIB, "per_sample": 10 * MIB,
                                                                "capacity": {"*": GIB + 95 * MIB}}))
    oom_record()
    app = make_app()
    async with app.run_test(size=(100, 40)) as pilot:
        screen = await open_symptom(pilot, "oom")
        status = lambda: str(screen.query_one("#ts-status", Static).render())  # noqa: E731
        await pilot.press("b")
        await wait_for_app(pilot, lambda: "mgtutor fit on" in status(), 30, what="the search's start")
        await wait_for_app(pilot, lambda: not screen.busy, 400, what="the answer")
        assert "largest 9" in status(), status()
        lines = screen.query_one("#ts-log", Log).lines
        trials = [line for line in lines if line.startswith("trial ")]
        assert len(trials) >= 3 and any("out of memory on rank 0" in line for line in trials)
        assert any(line.startswith("command") and "--batch-size" in line and "--grad-accum" in line for line in lines)
        assert len(app.active_runs) == len(trials)  # every trial is a run the App owns
