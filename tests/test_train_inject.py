"""`--inject MODE` makes the real failure happen on 2 gloo ranks: PyTorch's own error text, the
right rank failing first, a non-zero exit. slow-rank and no-sampler are silent failures (the run
finishes): their evidence is in the events and the indices, checked here and in test_train.py."""
from __future__ import annotations

import pytest

from mgtutor.training.runs.records.record import exit_code_for
from test_train import events, logs, train

pytestmark = pytest.mark.integration  # starts processes

FAILING = {
    # mode: (extra args, rank that fails first, exception in its error event, text in its error event)
    "hang-before-init": (["--init-timeout", "4"], 0, None, "imeout"),
    "oom": ([], 1, "MemoryError", ""),
    "crash-rank": ([], 1, "RuntimeError", "injected crash: rank 1 raised at step 3"),
    "nan-loss": ([], None, "FloatingPointError", "loss is nan"),
    "unused-param": ([], None, "RuntimeError", "Expected to have finished reduction in the prior iteration"),
}


@pytest.mark.parametrize("mode", list(FAILING))
def test_inject_produces_the_real_failure(mode: str) -> None:
    extra, first_rank, exception, text = FAILING[mode]
    record = train("--steps", "6", "--inject", mode, *extra)
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


def test_slow_rank_is_a_straggler_that_slows_everyone() -> None:
    record = train("--steps", "4", "--inject", "slow-rank", "--slow-seconds", "0.3", "--timing-skip", "1")
    assert record.result().status == "finished", logs(record)
    slow = [e["data_wait_s"] for e in events(record, "step", 1)]
    assert slow and min(slow) >= 0.3
    # rank 0 has no sleep of its own, yet its steps take as long: it waits in the all-reduce
    fast = events(record, "result", 0)[0]
    assert fast["data_wait_s"] < 0.3 <= fast["step_s"] * 1.34
