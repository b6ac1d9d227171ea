"""The one feed of a followed run (issue 42 item 4) on run directories written here, no process started:
what it composes from its Watch, a late attach to an ended run that ends at once (issue 46 item 15), a
bad line in a live events.jsonl that is skipped (item 10), the ranks' tracebacks folded (issue 44, run
diagnoses 4), and the Monitor's charts of a run that ended before its first step (issue 45 item 5)."""
from __future__ import annotations

import io
import json
import time
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from mgtutor.diagnostics.failures.hang.watch import HangWatch
from mgtutor.diagnostics.feed import open_feed
from mgtutor.training.runs.events.writer import encode
from mgtutor.training.runs.follow.detectors import RunWatch
from mgtutor.training.runs.follow.feed import Watch
from mgtutor.training.runs.follow.heartbeats import watchers_dir
from mgtutor.training.runs.follow.rank_tracebacks import MAX_HOLD_S, TracebackFold, last_exception
from mgtutor.training.runs.follow.samples import SampleRecorder, read_samples
from mgtutor.training.runs.records.record import RankExit, RunMeta, RunRecord, build_result, runs_root
from mgtutor.tui.cli import build_parser
from mgtutor.tui.commands.run import detached_text
from mgtutor.tui.screens.monitor import MonitorScreen
from mgtutor.tui.widgets.training_charts import TrainingCharts
from tests.helpers import wait_for_app
from tests.monitor_helpers import make_app

T0 = 1767225600.0
TRACEBACK = ["Traceback (most recent call last):", '  File "/job/train.py", line 8, in <module>', "    main()",
             '  File "/job/train.py", line 4, in main', "    return x.view(3, 5)", "           ^^^^^^^^^^^^",
             "RuntimeError: shape '[3, 5]' is invalid for input of size 16"]


@pytest.fixture(autouse=True)
def no_nvml(monkeypatch):
    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")


def two_ranks(label: str = "feed", root: Path | None = None) -> RunRecord:
    record = RunRecord.create(label, root or runs_root())
    record.write_meta(RunMeta(run_id=record.run_id, world_size=2, backend="gloo", started=T0, ended=T0 + 9,
                              target=["train.py"]))
    for rank in (0, 1):
        record.write_rank(RankExit(rank=rank, pid=None, started=T0 + 1))
    return record


def end(record: RunRecord, codes: tuple[int, int]) -> None:
    for rank, code in enumerate(codes):
        record.write_rank(RankExit(rank=rank, pid=None, started=T0 + 1, ended=T0 + 8, exit_code=code))
    record.write_result(build_result(record, torchrun_exit=max(codes)))


def append(path: Path, data: bytes) -> None:
    with path.open("ab") as handle:
        handle.write(data)


def for_a_while(seconds: float, then=lambda: None):
    """A run that goes on for `seconds`, then ends (`then` writes how)."""
    deadline = time.monotonic() + seconds
    ended = []

    def alive() -> bool:
        if time.monotonic() < deadline:
            return True
        if not ended:
            ended.append(then())
        return False

    return alive


# ---- what the feed composes -------------------------------------------------------------------

def test_the_feed_builds_the_detectors_the_hang_watch_and_the_recorder_from_its_watch():
    record = two_ranks()
    kinds = lambda feed: [type(d) for d in feed.session.detectors]  # noqa: E731
    assert kinds(open_feed(record, watch=Watch())) == [RunWatch, SampleRecorder, HangWatch]
    assert kinds(open_feed(record, watch=Watch(hang_after=0, record_samples=False))) == [RunWatch]
    assert kinds(open_feed(record, watch=None)) == []
    hang = open_feed(record, watch=Watch(hang_after=7.5, stop_on_hang=True)).session.detectors[-1]
    assert isinstance(hang, HangWatch) and hang.clock.quiet_s == 7.5 and hang.stop_on_hang


@pytest.mark.integration
@pytest.mark.parametrize("codes", [(0, 0), (0, 1)])
def test_the_feed_records_and_shows_the_meters_and_diagnoses_a_failed_run_only(codes):
    record = two_ranks()
    append(record.rank_log(1, "stderr"), ("\n".join(TRACEBACK) + "\n").encode())
    feed = open_feed(record, watch=Watch(show_meters=True), alive=for_a_while(1.5, lambda: end(record, codes)),
                     watcher=None)
    updates = list(feed.updates())
    final = updates[-1]
    assert final.final and final.result is not None and final.result.status == ("failed" if any(codes) else "finished")
    assert any(u.meters is not None for u in updates)  # the Monitor's meters, from the same sampler
    assert read_samples(record)  # and the run's samples.jsonl, once a second
    if any(codes):
        assert final.failed and final.findings and final.findings[0].kind == "child_failed"
    else:
        assert not final.failed and final.findings == []  # a finished run's findings are no view's


def test_a_late_attach_to_an_ended_run_ends_at_once_without_reading_its_events():
    record = two_ranks("ended")
    append(record.events_path, b"".join(encode("step", step % 2, step=step // 2, loss=1.5) for step in range(40_000)))
    end(record, (0, 0))
    feed = open_feed(record, watch=None, from_start=False, watcher="mgtutor runs attach")
    updates = list(feed.updates())
    assert len(updates) == 1 and updates[0].final and updates[0].result.status == "finished"
    assert feed.session.events.offset == 0  # not a byte of its 40,000 events was read
    assert not watchers_dir(record).exists() or not list(watchers_dir(record).iterdir())  # nobody "watches" it


def test_attach_to_an_ended_run_says_it_ended_and_never_that_it_goes_on():
    record = two_ranks("ended")
    end(record, (0, 0))
    out, err = io.StringIO(), io.StringIO()
    args = build_parser().parse_args(["runs", "attach", record.run_id])
    with redirect_stdout(out), redirect_stderr(err):
        code = args.func(args)
    assert code == 0
    assert "has ended (finished)" in err.getvalue() and "run finished" in err.getvalue()
    assert "goes on" not in out.getvalue() + err.getvalue()
    said = detached_text(record)  # what a Ctrl+C during such an attach says
    assert "has ended (finished)" in said and "goes on" not in said


# ---- a bad line in a live events.jsonl ----------------------------------------------------------

def test_an_event_with_a_400_digit_number_is_skipped_and_the_follow_goes_on():
    record = two_ranks("bad-line")
    huge = "9" * 400
    append(record.events_path, encode("step", 0, step=1, loss=1.5, samples_per_s=10.0)
           + f'{{"rank": 0, "t": {T0 + 2}, "type": "step", "step": 2, "loss": {huge}}}\n'.encode()
           + f'{{"rank": {huge}, "t": {T0 + 2}, "type": "step", "step": 2}}\n'.encode()
           + f'{{"rank": 1, "t": {huge}, "type": "step", "step": 2}}\n'.encode()
           + encode("step", 0, step=3, loss=0.5, samples_per_s=12.0))
    feed = open_feed(record, watch=Watch(record_samples=False), alive=for_a_while(1.2), watcher=None)
    updates = list(feed.updates())
    final = updates[-1]
    assert final.final and final.state is not None
    assert [e.step for u in updates for e in u.events] == [1, 3]
    assert final.state.ranks[0].last_step == 3 and [v for _, v in final.state.ranks[0].loss] == [1.5, 0.5]
    assert feed.skipped_events == 3


# ---- the ranks' tracebacks ----------------------------------------------------------------------

def lines(rank: int, texts: list[str], prefix: bool = True) -> list[tuple[int, str, str]]:
    return [(rank, "stderr", f"[rank{rank}]: {t}" if prefix else t) for t in texts]


def test_the_same_traceback_from_two_ranks_is_shown_once_naming_both_without_torchs_prefix():
    fold = TracebackFold()
    shown = fold.feed([(0, "stdout", "epoch 1")] + lines(0, TRACEBACK) + lines(1, TRACEBACK), now=0.0)
    assert shown == [((0,), "stdout", "epoch 1")]  # the tracebacks wait for a copy from another rank
    shown = fold.feed([(None, "stderr", "torchrun: rank 0 failed")], now=1.0)
    assert shown == [(None, "stderr", "torchrun: rank 0 failed")] + [((0, 1), "stderr", t) for t in TRACEBACK]
    later = fold.feed(lines(2, TRACEBACK, prefix=False), now=2.0) + fold.flush()
    assert later == [((2,), "stderr", "(the same traceback as ranks 0, 1, above)")]
    assert fold.exception(1) == TRACEBACK[-1]


def test_only_a_ranks_own_torch_prefix_is_dropped_and_its_lines_keep_their_order():
    fold = TracebackFold()
    shown = fold.feed([(0, "stdout", "[rank1]: not mine"), (0, "stdout", "[rank0]:[W1206] a warning")], now=0.0)
    assert [t for _, _, t in shown] == ["[rank1]: not mine", "[W1206] a warning"]
    other = TRACEBACK[:-1] + ["ValueError: another"]
    shown = fold.feed(lines(0, TRACEBACK) + [(0, "stderr", "after 0")] + lines(1, other) + [(1, "stderr", "after 1")],
                      now=1.0) + fold.flush()
    assert [(r, t) for r, _, t in shown] == ([((0,), t) for t in TRACEBACK] + [((0,), "after 0")]
                                             + [((1,), t) for t in other] + [((1,), "after 1")])


def test_a_chained_traceback_stays_one_and_nothing_is_held_past_the_limit():
    chained = TRACEBACK + ["", "During handling of the above exception, another exception occurred:", ""] \
        + TRACEBACK[:-1] + ["KeyError: 'lr'"]
    fold = TracebackFold()
    assert fold.feed(lines(0, chained) + lines(1, chained), now=0.0) == []
    shown = fold.feed([], now=0.6)
    assert [t for _, _, t in shown] == chained and {r for r, _, _ in shown} == {(0, 1)}
    assert fold.exception(0) == "KeyError: 'lr'"
    assert fold.feed(lines(0, TRACEBACK[:3]), now=10.0) == []  # a rank that stops mid-traceback…
    assert [t for _, _, t in fold.feed([], now=10.0 + MAX_HOLD_S)] == TRACEBACK[:3]  # …is shown as it is


def test_the_last_exception_of_a_rank_is_read_from_its_log():
    record = two_ranks("exception")
    append(record.rank_log(1, "stderr"), ("\n".join(["[rank1]: " + t for t in TRACEBACK]) + "\nbye\n").encode())
    assert last_exception(record, 1) == TRACEBACK[-1] and last_exception(record, 0) is None


# ---- the Monitor's charts of a run that ended before its first step -------------------------------

def trial(batch: int, fits: bool) -> bytes:
    return encode("step", 0, kind="maxbatch", batch=batch, fits=fits, peak_bytes=batch << 20, seconds=0.5,
                  phase="fit")


@pytest.mark.parametrize("events, codes, said", [
    (b"", (0, 1), "the run failed before any training step was recorded"),
    (b"", (0, 0), "no optimizer steps were seen"),
    (trial(64, True) + trial(128, False), (0, 1),
     "the run failed before any training step was recorded, during the batch finder's trial 2 (batch 128 does not fit)"),
    (trial(64, True) + encode("result", 0, kind="maxbatch", chosen_batch=56, measured_max=64, predicted=60,
                              fixed_bytes=1, per_sample_bytes=1, budget_bytes=1, margin_pct=10.0, seconds=1.0),
     (0, 0), "the batch finder chose batch 56 after 1 trial(s)"),
], ids=["failed", "finished", "finder-failed", "finder-answered"])
@pytest.mark.integration
async def test_the_charts_of_an_ended_run_say_what_happened_never_that_they_wait(events, codes, said):
    record = two_ranks("charts")
    append(record.events_path, encode("start", 0, pid=1) + events)
    end(record, codes)
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("m")
        screen = pilot.app.screen
        assert isinstance(screen, MonitorScreen)
        screen.attach(RunRecord(record.path))
        await wait_for_app(pilot, lambda: screen.state is not None and screen.state.done, 30, what="the run's end")
        await pilot.pause()
        charts = screen.query_one(TrainingCharts).render_charts(200).plain
    assert said in charts and "waiting" not in charts, charts


def test_a_batch_finders_trials_are_its_progress_while_it_runs():
    from mgtutor.training.runs.follow.runstate import RunStateFolder
    from mgtutor.tui.widgets.training_charts import no_steps_text

    record = two_ranks("finder")
    append(record.events_path, trial(64, True) + trial(128, False))
    state = RunStateFolder(record, alive=lambda: True).refresh(T0 + 5)
    assert no_steps_text(state) == "finding the batch size: trial 2, batch 128 does not fit"
    json.dumps(state.batch_search.__dict__)  # plain values a view may keep
