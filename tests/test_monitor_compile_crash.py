"""The Monitor, like `mgtutor train`, trains again with --compile off when the compiler (not the
training) killed a rank: a real gloo rank whose compile dies of SIGSEGV at the compile boundary."""
from __future__ import annotations

import json

import pytest

from mgtutor.training.runs.records.record import list_runs
from mgtutor.training.worker.trainer import compiling
from tests.helpers import wait_for_app
from tests.monitor_helpers import make_app
from tests.test_monitor_live import SIZE, launch_from_form, open_form

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture(autouse=True)
def no_nvml(monkeypatch):
    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")


async def test_a_compiler_crash_in_the_monitor_trains_again_without_compiling(monkeypatch, standin_torchrun):
    """The Monitor's own retry, on the real trainer's rank started by the stand-in torchrun. One rank: the fake
    crash kills every rank alike, in its own compile (the same crash under the real torchrun, through `mgtutor
    train`: test_train_compile.py::test_a_compiler_that_crashes_its_rank_is_trained_again_without_compiling)."""
    monkeypatch.setenv(compiling.FAKE_CRASH_ENV, "1")  # the ranks inherit it: their compile dies of SIGSEGV
    app = make_app()
    said = _notifications_of(app)  # kept: a loaded box may take longer than the notice's 20 s to train again
    async with app.run_test(size=SIZE) as pilot:
        screen, form = await open_form(pilot, nproc="1", backend="gloo", steps="4", log_every="2",
                                       batch_size="8", compile="default")
        await launch_from_form(pilot, form)
        try:
            await wait_for_app(pilot, lambda: _second_run_ended(screen), 300, what="the run without compiling to end")
        except AssertionError as exc:  # say where it stood: which runs, their states, the shown line
            runs = [(r.run_id, r.status(), r.result().first_failure) for r in list_runs()]
            raise AssertionError(f"{exc}; runs {runs}; shown {screen.query_one('#run-state').plain!r}") from None
        first, second = sorted(list_runs(), key=lambda r: r.run_id)
        assert first.result().first_failure.signal == "SIGSEGV"
        assert screen.record.run_id == second.run_id
        assert screen.state.phase == "finished", second.rank_log(0, "stderr").read_text()[-1500:]
        argv = json.loads((second.path / "meta.json").read_text())["target"]
        assert argv[argv.index("--compile") + 1] == "off"
        said = " ".join(said)
        assert "died of SIGSEGV while inductor compiled its step (default): a crash in the compiler" in said
        assert "training again without compiling (--compile off)" in said
        assert list(screen.launched) == [second.run_id]  # a reattach to the failed run later starts no third


def _second_run_ended(screen) -> bool:
    runs = list(list_runs())
    return (len(runs) == 2 and screen.record is not None and screen.record.run_id == runs[0].run_id
            and screen.state is not None and screen.state.done)


def _notifications_of(app) -> list[str]:
    said: list[str] = []
    notify = app.notify

    def kept(message, *args, **kwargs):
        said.append(str(message))
        return notify(message, *args, **kwargs)

    app.notify = kept
    return said
