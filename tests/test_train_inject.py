"""`--inject MODE` makes the real failure happen on 2 gloo ranks: PyTorch's own error text, the
right rank failing first, a non-zero exit. slow-rank and no-sampler are silent failures (the run
finishes): slow-rank's evidence is in the events, checked here; no-sampler's in the indices, checked in
test_train_cli.py (and diagnosed in test_demos.py).

Each mode is checked on the run of the failure demo that injects it (diagnostics/failures/demos.py: the
trainer, `--inject MODE`, on 2 gloo ranks), which test_demos.py diagnoses too: one run for both tests, made
once per worker (tests/demo_runs.py: `demo_run`, and `zh_demo_crash_run` for crash-rank), the two tests in
the demo's xdist group."""
from __future__ import annotations

import pytest

from mgtutor.training.runs.records.record import RunRecord, exit_code_for
from test_train import events, logs
from tests.demo_runs import INJECT_OF, demo_group, inject_mode
from tests.demo_runs import demo_run, zh_demo_crash_run  # noqa: F401 - fixtures: the shared runs

pytestmark = pytest.mark.integration  # starts processes

FAILING = {
    # mode: (the demo that injects it, rank that fails first, exception in its error event, text in its error event)
    "hang-before-init": ("never-joins", 0, None, "imeout"),
    "oom": ("oom", 1, "MemoryError", ""),
    "crash-rank": ("crash", 1, "RuntimeError", "injected crash: rank 1 raised at step 3"),
    "nan-loss": ("nan-loss", None, "FloatingPointError", "loss is nan"),
    "unused-param": ("unused-param", None, "RuntimeError",
                     "Expected to have finished reduction in the prior iteration"),
}


def injected_run(demo: str, request: pytest.FixtureRequest) -> RunRecord:
    """The record of demo `demo`'s run: the Chinese `mgtutor demo crash` for crash, run_demo for the others."""
    if demo == "crash":
        return RunRecord(request.getfixturevalue("zh_demo_crash_run").record)
    return request.getfixturevalue("demo_run")(demo).outcome.run.record


@pytest.mark.parametrize("mode", [pytest.param(mode, marks=demo_group(demo)) for mode, (demo, *_) in FAILING.items()])
def test_inject_produces_the_real_failure(mode: str, request: pytest.FixtureRequest) -> None:
    demo, first_rank, exception, text = FAILING[mode]
    assert inject_mode(demo) == INJECT_OF[demo] == mode  # the demo's run is the trainer with --inject MODE
    record = injected_run(demo, request)
    typed = record.result()
    result = typed.to_json()
    assert result["status"] == "failed", logs(record)
    assert exit_code_for(typed) != 0
    errors = {e["rank"]: e for e in events(record, "error")}
    culprit = first_rank if first_rank is not None else result["first_failure"]["rank"]
    if first_rank is not None:
        assert result["first_failure"]["rank"] == first_rank, (result, logs(record))
    assert culprit in errors, logs(record)
    if exception:
        assert errors[culprit]["exception"] == exception, errors
    assert text in errors[culprit]["error"], errors
    # the traceback in the rank's own stderr is the one the classifier and the user will read
    assert (exception or "Error") in record.rank_log(culprit, "stderr").read_text()
    if mode == "hang-before-init":
        assert events(record, "start", 1) and not events(record, "rendezvous", 1)
        assert not events(record, "rendezvous", 0)  # rank 0 waited in init and never got through
    if mode == "nan-loss":
        assert set(errors) == {0, 1}  # the NaN gradients reached the rank that was not poisoned


@demo_group("straggler")
def test_slow_rank_is_a_straggler_that_slows_everyone(demo_run) -> None:
    """The straggler demo: rank 1 sleeps 0.3 s before each of 8 steps (the first left out of the timing)."""
    assert inject_mode("straggler") == INJECT_OF["straggler"] == "slow-rank"
    record = demo_run("straggler").outcome.run.record
    assert record.result().status == "finished", logs(record)
    slow = [e["data_wait_s"] for e in events(record, "step", 1)]
    assert slow and min(slow) >= 0.3
    # rank 0 has no sleep of its own, yet its steps take as long: it waits in the all-reduce
    fast = events(record, "result", 0)[0]
    assert fast["timed_steps"] == fast["steps"] - 1  # the warm-up step is left out of the timing (--timing-skip 1)
    assert fast["data_wait_s"] < 0.3 <= fast["step_s"] * 1.34
