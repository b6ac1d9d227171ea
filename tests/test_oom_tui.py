"""The OOM answers in the TUI, in a real app: the Monitor's failure banner carries the numbers of a
real OOM message, and Troubleshoot → Out of memory finds the batch (b, real CPU ranks, the GPU memory
faked at the CUDA boundary only) and runs the newest run's script again with --memory (w)."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from textual.widgets import Log, Static

from mgtutor.training.runs.launch.launcher import LaunchSpec, launch
from mgtutor.training.runs.records.record import RunRecord
from mgtutor.tui.app import MgTutorApp
from tests.helpers import open_symptom, wait_for_app
from tests.monitor_helpers import make_app

LOGS = Path(__file__).parent / "data" / "logs"
FAKE = {"fixed": 100_000_000, "per_sample": 1_000_000, "capacity": {"*": 700_000_000}}


def oom_script(tmp_path: Path, oom_rank: int = 1) -> Path:
    """A rank script whose rank `oom_rank` dies of a CUDA OOM, printing PyTorch's own message (from a real log)."""
    line = next(x for x in (LOGS / "cuda_oom_shared_gpu.log").read_text().splitlines() if "out of memory" in x)
    message = line.split("torch.OutOfMemoryError: ", 1)[1]
    script = tmp_path / "train_oom.py"
    script.write_text(f"import os, sys\nif os.environ['RANK'] == '{oom_rank}':\n"
                      f"    print('torch.OutOfMemoryError: ' + {message!r}, file=sys.stderr, flush=True)\n"
                      "    sys.exit(1)\n")
    return script


@pytest.mark.integration
async def test_the_monitor_banner_shows_how_much_to_free(monkeypatch, tmp_path: Path, standin_torchrun) -> None:
    """The torch-free OOM script's ranks start through the stand-in torchrun: the banner reads the rank's log."""
    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")
    app = make_app()
    async with app.run_test(size=(110, 45)) as pilot:
        await pilot.press("m")
        await pilot.pause()
        screen = pilot.app.screen
        from mgtutor.tui.widgets.launch_form import LaunchForm
        form = screen.query_one(LaunchForm)
        for key, value in {"kind": "script", "script": str(oom_script(tmp_path)), "nproc": "2", "backend": "gloo"}.items():
            form.query_one(f"#f-{key}").value = value
        await pilot.pause()
        form.query_one("#f-nproc").focus()
        await pilot.press("enter")
        await wait_for_app(pilot, lambda: screen.finding is not None, 180, what="the diagnosis")
        banner = screen.query_one("#failure-banner").plain.replace("\n", " ")
        assert screen.finding.kind == "cuda_oom"
        assert "PyTorch held 49.63 GiB in tensors" in banner and "at least 71.7 MiB must be freed" in banner


@pytest.mark.integration
async def test_troubleshoot_oom_finds_the_batch_with_every_trial_shown(monkeypatch, standin_torchrun) -> None:
    """The finder's real rank starts through the stand-in torchrun: what is tested is the screen showing its
    trials (the finder under the real torchrun, on two ranks: test_maxbatch.py)."""
    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")
    monkeypatch.setenv("MGTUTOR_FAKE_CUDA_MEMORY", json.dumps(FAKE))
    app = MgTutorApp()
    async with app.run_test(size=(100, 40)) as pilot:
        screen = await open_symptom(pilot, "oom")
        status = lambda: str(screen.query_one("#ts-status", Static).render())  # noqa: E731
        assert "b: find the largest batch" in status()
        from mgtutor.diagnostics.bench.maxbatch import FinderOptions
        monkeypatch.setattr("mgtutor.tui.screens.troubleshoot_oom.FinderOptions",
                            lambda **kw: FinderOptions(**{**kw, "model": "tinycnn", "image_size": 8, "prove_steps": 2,
                                                          "nproc": 1}))
        await pilot.press("b")
        await wait_for_app(pilot, lambda: "--batch-size" in status() or "no answer" in status(), 240, what="the answer")
        assert "--batch-size 560" in status() and "measured maximum 600" in status()
        lines = screen.query_one("#ts-log", Log).lines
        trials = [line for line in lines if "batch finder: trial" in line]
        numbers = [int(re.search(r"trial +(\d+)", line).group(1)) for line in trials]
        assert numbers == list(range(1, len(trials) + 1)) and len(trials) >= 4  # every trial, in order
        verdicts = {int(m[1]): m[2] for line in trials if (m := re.search(r" batch +(\d+)  (.*?)  \(", line))}
        assert max(verdicts) > 600 and all(said.startswith("out of memory") == (batch > 600)  # 600 at most
                                           for batch, said in verdicts.items()), verdicts
        assert any(line.startswith("chosen batch      560") for line in lines)


@pytest.mark.integration
async def test_troubleshoot_oom_runs_the_newest_script_again_with_memory(monkeypatch, tmp_path: Path,
                                                                          standin_torchrun) -> None:
    """Both runs (the torch-free OOM script, then it again with --memory) through the stand-in torchrun, on
    one rank: the --memory note is each rank's own."""
    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")
    first = launch(LaunchSpec(target=[str(oom_script(tmp_path, oom_rank=0))], nproc=1, backend="gloo", label="oom"))
    first.wait(timeout=120)
    app = MgTutorApp()
    async with app.run_test(size=(100, 40)) as pilot:
        screen = await open_symptom(pilot, "oom")
        status = lambda: str(screen.query_one("#ts-status", Static).render())  # noqa: E731
        await pilot.press("w")
        await wait_for_app(pilot, lambda: "--memory run" in status(), 180, what="the --memory run")
        run_id = status().split("--memory run ", 1)[1].split(":", 1)[0]
        again = RunRecord(Path(first.record.path).parent / run_id)
        assert again.meta().env.get("MGTUTOR_MEMORY_HISTORY") == "1" and again.meta().target == first.record.meta().target
        assert "no CUDA device in this rank" in again.rank_log(0, "stderr").read_text()
        assert screen.findings and screen.findings[0].kind == "cuda_oom"


def test_the_batch_finder_takes_the_model_of_the_newest_trainer_run(tmp_path: Path) -> None:
    from mgtutor.training.runs.records.record import RunMeta
    from mgtutor.tui.screens.troubleshoot_oom import last_trainer_model

    assert last_trainer_model() == ("resnet50", 224)  # no runs yet
    record = RunRecord.create("train-resnet18")
    record.write_meta(RunMeta(run_id=record.run_id, target=["-m", "mgtutor.training.worker.train", "--model",
                                                            "resnet18", "--image-size", "96"]))
    assert last_trainer_model() == ("resnet18", 96)
