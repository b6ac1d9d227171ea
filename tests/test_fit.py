"""`mgtutor fit` without starting a process: the batch option read from a script, the search's choice of
trials over a memory line, the command it prints, and an OOM's diagnosis that gives the batch or the
command (issue 43, items 3 and 4). The trials on real ranks are in tests/test_fit_run.py."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from mgtutor.diagnostics.bench.fit_words import answer_lines, trial_line
from mgtutor.diagnostics.bench.scriptfit import FitSearch, FitTrial, command_for
from mgtutor.diagnostics.check.script_options import (
    NoBatchOption,
    accumulation_option,
    find_batch_option,
    option_value,
    script_options,
    with_option,
)
from mgtutor.diagnostics.failures.classify import diagnose_run
from mgtutor.diagnostics.failures.oom.batch import measured_batch, step_points
from mgtutor.training.runs.events.reader import parse_event
from mgtutor.training.runs.records.record import RankExit, RunRecord

DATA = Path(__file__).parent / "data"
SCRIPT = DATA / "fit_ddp.py"
MIB, GIB = 1 << 20, 1 << 30


def test_the_batch_option_is_found_among_the_scripts_options_and_the_eval_batch_is_not_it() -> None:
    option, options = find_batch_option(SCRIPT)
    assert option.flag == "--batch-size" and option.default == 64
    assert {o.flag for o in options} >= {"--eval-batch-size", "--grad-accum", "--steps"}
    accum = accumulation_option(options)
    assert accum is not None and accum.flag == "--grad-accum"


def test_a_named_batch_option_is_taken_by_flag_or_by_name(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("import argparse\np = argparse.ArgumentParser()\np.add_argument('-m', '--micro', type=int, "
                      "default=4)\np.add_argument('--lr', type=float)\n")
    with pytest.raises(NoBatchOption, match=r"--micro, --lr.*--batch-arg NAME"):
        find_batch_option(script)
    assert find_batch_option(script, "micro")[0].flags == ("-m", "--micro")
    assert find_batch_option(script, "-m")[0].flag == "--micro"
    assert find_batch_option(script, "--not-in-the-text")[0].flag == "--not-in-the-text"


@pytest.mark.parametrize("argv,value", [
    (["train.py", "--batch-size", "160", "--lr", "1"], "160"),
    (["train.py", "--batch-size=160"], "160"),
    (["train.py", "--batch-size", "8", "--batch-size", "12"], "12"),
    (["train.py"], None),
])
def test_a_trial_sets_the_batch_on_the_command_line_whatever_form_it_had(argv: list[str], value: str | None) -> None:
    option = next(o for o in script_options(SCRIPT) if o.flag == "--batch-size")
    assert option_value(argv, option) == value
    changed = with_option(argv, option, 48)
    assert changed == [a for a in argv if a in ("train.py", "--lr", "1")] + ["--batch-size", "48"]


def line_trials(search: FitSearch, fixed: int, per_sample: int, capacities: dict[int, int]) -> FitSearch:
    """The search fed with what ranks on GPUs of these capacities would report, on a straight memory line."""
    while (step := search.next_batch()) is not None:
        batch, phase = step
        peak = fixed + per_sample * batch
        fits = all(peak <= cap for cap in capacities.values())
        search.record(FitTrial(batch, phase, fits, peaks={r: peak for r in capacities} if fits else {},
                               budgets=dict(capacities) if fits else {},
                               oom_ranks=[r for r, cap in capacities.items() if peak > cap]))
    return search


@pytest.mark.parametrize("fixed,per_sample,capacity", [
    (6 * GIB, 2800 * MIB, 139 * GIB),   # issue 43's transformer: 48 fits, the user asked for 160
    (1 * GIB, 10 * MIB, 80 * GIB),      # a small model: thousands fit
    (60 * GIB, 400 * MIB, 78 * GIB),    # weights and optimizer state take most of the GPU
    (1 * GIB, 3 * GIB, 20 * GIB),       # not even the first trial's batch fits
])
def test_the_search_finds_the_edge_within_two_percent_in_a_few_trials(fixed: int, per_sample: int, capacity: int) -> None:
    search = line_trials(FitSearch(), fixed, per_sample, {0: capacity, 1: capacity + GIB})
    true_max = (capacity - fixed) // per_sample
    answer = search.answer()
    assert true_max * 0.98 <= answer.largest <= true_max
    assert len(answer.trials) <= 8, [(t.batch, t.fits) for t in answer.trials]
    assert answer.recommended <= answer.largest


def test_a_memory_line_steeper_near_the_edge_is_caught_by_the_confirm_trials() -> None:
    search = FitSearch()
    while (step := search.next_batch()) is not None:  # above 40 each sample costs twice as much
        batch, phase = step
        peak = 4 * GIB + 500 * MIB * batch + (500 * MIB * (batch - 40) if batch > 40 else 0)
        fits = peak <= 60 * GIB
        search.record(FitTrial(batch, phase, fits, peaks={0: peak}, budgets={0: 60 * GIB}))
    assert search.answer().largest == max(b for b in range(1, 200)
                                          if 4 * GIB + 500 * MIB * b + 500 * MIB * max(0, b - 40) <= 60 * GIB)


def test_a_script_that_fails_for_another_reason_stops_the_search_with_its_error() -> None:
    search = FitSearch()
    while (step := search.next_batch()) is not None:
        search.record(FitTrial(step[0], step[1], False, error="ValueError: no data set"))
    answer = search.answer()
    assert [t.batch for t in answer.trials] == [8, 1]
    assert answer.largest == 0 and answer.error == "ValueError: no data set"


def test_the_command_keeps_the_users_global_batch_with_accumulation_where_the_script_has_it() -> None:
    option, options = find_batch_option(SCRIPT)
    accum = accumulation_option(options)
    kept = command_for(["fit_ddp.py", "--batch-size", "160"], 48, 4, option, accum)
    assert kept.global_batch == kept.user_global == 640 and kept.per_rank <= 48
    assert kept.argv == ["fit_ddp.py", "--batch-size", str(kept.per_rank), "--grad-accum", str(kept.accumulation)]
    plain = command_for(["fit_ddp.py", "--batch-size", "160"], 48, 4, option, None)
    assert plain.argv == ["fit_ddp.py", "--batch-size", "48"] and plain.accumulation is None
    assert plain.run_argv(4) == ["mgtutor", "run", "--nproc", "4", "--", "fit_ddp.py", "--batch-size", "48"]
    answer = line_trials(FitSearch(), 6 * GIB, 2800 * MIB, {0: 139 * GIB}).answer()
    lines = answer_lines(answer, plain, 4, 3)
    assert lines[-1].split()[1:] == ["mgtutor", "run", "--nproc", "4", "--", "fit_ddp.py", "--batch-size", "48"]
    assert "no gradient accumulation option" in "\n".join(lines)
    assert "out of memory on rank 1" in trial_line(2, FitTrial(160, "fit", False, oom_ranks=[1]))


def oom_run(tmp_path: Path, steps: list[tuple[int, float]]) -> RunRecord:
    """A user script's run: hook step events at (batch, peak MiB), then rank 0's OOM (PyTorch 2 wording)."""
    record = RunRecord(tmp_path / "run")
    (record.path / "logs").mkdir(parents=True)
    (record.path / "ranks").mkdir()
    record.write_meta(record.meta().__class__.from_json({
        "run_id": "run", "target": [str(tmp_path / "train.py"), "--batch-size", "160"], "cwd": str(tmp_path),
        "world_size": 2, "nproc_per_node": 2}))
    record.write_rank(RankExit(rank=0, local_rank=0, node_rank=0, world_size=2, pid=11, wrapper_pid=10, exit_code=1))
    record.rank_log(0, "stderr").write_text(
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
        "79.10 GiB of which 1.00 GiB is free. Including non-PyTorch memory, this process has 78.00 GiB memory in "
        "use. Of the allocated memory 70.00 GiB is allocated by PyTorch, and 7.00 GiB is reserved by PyTorch but "
        "unallocated.\n")
    record.events_path.write_text("".join(json.dumps({"rank": 0, "t": 1, "type": "step", "step": i + 1, "origin": "hook",
                                                      "batch": b, "mem_peak_mib": p}) + "\n"
                                          for i, (b, p) in enumerate(steps)))
    return record


def test_an_oom_after_steps_at_two_batch_sizes_says_the_batch_that_fits(tmp_path: Path) -> None:
    # 6 GiB fixed + 1 GiB a sample; PyTorch could hold 70 + 7 + 1 = 78 GiB: 78 × 0.95 = 74.1 → 68
    record = oom_run(tmp_path, [(8, 14 * 1024), (16, 22 * 1024), (8, 22 * 1024)])
    oom = next(f for f in diagnose_run(record) if f.kind == "cuda_oom")
    assert "a per-GPU batch of 68 fits" in oom.fix and "by at least" not in oom.fix
    assert oom.numbers is not None and oom.numbers["batch_that_fits"]["batch"] == 68


def test_an_oom_with_one_batch_measured_or_none_gives_the_fit_command_for_the_runs_own_script(tmp_path: Path) -> None:
    for steps in ([(160, 60 * 1024)], []):
        record = oom_run(tmp_path / str(len(steps)), steps)
        oom = next(f for f in diagnose_run(record) if f.kind == "cuda_oom")
        assert "`mgtutor fit --nproc 2 -- train.py --batch-size 160`" in oom.fix
        assert ("only a weak lower bound" in oom.fix) == (not steps)
        assert "a per-GPU batch of" not in oom.fix


def test_a_smaller_batch_after_a_larger_one_does_not_count_since_the_hooks_peak_is_never_reset() -> None:
    events = [parse_event(json.dumps({"rank": 0, "t": 1, "type": "step", "step": s, "batch": b, "mem_peak_mib": p}))
              for s, b, p in ((1, 16, 200.0), (10, 8, 200.0), (20, 32, 300.0))]
    assert step_points(events, 0) == [(16, 200 * MIB), (32, 300 * MIB)]
    found = measured_batch(step_points(events, 0), 1100 * MIB)
    assert found is not None and found.batch == int((1100 * 0.95 - 100) // 6.25)
    assert measured_batch([(16, 200 * MIB)], 1100 * MIB) is None  # one batch size: no line, no number


def test_fit_without_a_gpu_or_without_a_batch_option_says_so_in_one_line(monkeypatch, capsys, tmp_path: Path) -> None:
    from mgtutor.tui.cli import main

    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")
    assert main(["fit", "--", str(SCRIPT)]) == 2
    err = capsys.readouterr().err
    assert "no NVIDIA GPU was found" in err and "no device memory to fit" in err and "Traceback" not in err
    plain = tmp_path / "plain.py"
    plain.write_text("import argparse\nargparse.ArgumentParser().add_argument('--lr', type=float)\n")
    assert main(["fit", "--", str(plain)]) == 2
    assert "looks like its batch size (its options: --lr); name it with --batch-arg NAME" in capsys.readouterr().err
    assert main(["fit", "--steps", "0", "--", str(SCRIPT)]) == 2
    assert "--steps must be at least 1" in capsys.readouterr().err
    assert main(["fit", "--", "-m", "pkg.train"]) == 2
    assert "--batch-arg NAME" in capsys.readouterr().err
