"""What the benchmarks say beside their numbers (issue 27, item 14): #wrong is N/A when nothing was
checked, and CPU ranks are said to share the machine's cores."""
from __future__ import annotations

from mgtutor.diagnostics.bench.allreduce_bench import bounds_line, format_pair
from mgtutor.diagnostics.bench.scaling import shared_cores_note


def _row(wrong: int | None) -> dict:
    return {"bytes": 8, "count": 2, "dtype": "float", "time_us": 1.0, "algbw_gbps": 0.1, "busbw_gbps": 0.1,
            "wrong": wrong}


def test_out_of_bounds_is_na_when_no_row_was_checked() -> None:
    assert bounds_line([_row(None), _row(None)]) == (
        "# Out of bounds values : N/A (results not checked; --check counts wrong elements)")
    assert "N/A" in format_pair([_row(None), _row(None)])


def test_out_of_bounds_counts_checked_rows() -> None:
    assert bounds_line([_row(0), _row(0)]) == "# Out of bounds values : 0 OK"
    assert bounds_line([_row(0), _row(3)]) == "# Out of bounds values : 3 FAILED"


def test_cpu_ranks_are_said_to_share_the_cores() -> None:
    note = shared_cores_note("gloo", 2, cpus=2)
    assert note is not None and "share this machine's 2 core(s)" in note and "1 thread(s) per rank" in note
    assert shared_cores_note("nccl", 8, cpus=64) is None  # GPUs add hardware
    assert shared_cores_note("gloo", 1, cpus=2) is None  # nothing to compare
