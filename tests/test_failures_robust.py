"""The classifier never raises, whatever the bytes, and reads huge logs in bounded memory."""
from __future__ import annotations

import io
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import examples

from mgtutor.diagnostics.failures.classify import diagnose_files, diagnose_lines
from mgtutor.diagnostics.failures.logs.logparse import read_log

OOM = b"[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 1 has a total capacity\n"
pieces = st.sampled_from([OOM, b"\xff\xfe\x80", b"\x1b[31m", b"\x1b]0;title\x07", b"\r", b"\n", b"[rank", b"]:",
                          b"exitcode  : -9 (pid: 1)", b"Traceback (most recent call last):\n", b"Root Cause",
                          b"{rank}", b"\x00", "é".encode()])


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.one_of(st.binary(max_size=200), pieces), max_size=40))
def test_any_bytes_never_raise(chunks: list[bytes]) -> None:
    data = b"".join(chunks)
    findings = diagnose_lines(read_log(io.BytesIO(data), "fuzz.log"))
    for finding in findings:
        finding.to_dict()
        assert "\x1b" not in finding.summary


def test_ten_megabyte_line_with_escapes_is_read(tmp_path: Path) -> None:
    log = tmp_path / "long.log"
    log.write_bytes(b"\x1b[2K" + b"x" * (10 << 20) + b"\n" + OOM)
    findings = diagnose_files([log])
    assert findings[0].kind == "cuda_oom" and findings[0].evidence[0]["line"] == 2


@pytest.mark.integration
def test_a_log_far_larger_than_the_memory_bound_is_read_within_it(tmp_path: Path) -> None:
    """85 MB, under a 32 MiB bound: the whole file never sits in memory (the 200 MB case and its time
    are a benchmark: tests/bench/diagnose_big_log.py)."""
    log = tmp_path / "big.log"
    block = (b"[rank0]: step 10 loss 2.30 progress " * 1000 + b"\n") * 28  # ~0.95 MB, 32 KB lines
    with log.open("wb") as handle:
        for _ in range(85):
            handle.write(block)
        handle.write(b"\xff" * (3 << 20))  # 3 MB with no newline at all
        handle.write(b"\n" + OOM)
    assert log.stat().st_size >= 85_000_000
    tracemalloc.start()
    try:
        findings = diagnose_files([log])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert findings[0].kind == "cuda_oom"
    assert peak < 32 << 20, f"peak {peak / 2**20:.1f} MiB"


def test_no_catalogue_pattern_can_be_made_to_read_a_line_over_and_over():
    """A run of `.` or `\\S` that does not end its pattern is bounded: unbounded, a line that repeats the
    pattern's start (`keys: /cpu//cpu/…`, `No space left on device …` 400 times) made the scan read the
    rest of the line again at each repeat, up to 500 times slower per byte than training noise
    (tests/bench/diagnose_crafted_lines.py measures it; docs/benchmarks.md has the numbers)."""
    import re

    from mgtutor.diagnostics.failures.catalogue import load_catalogue

    run = re.compile(r"(?<!\\)(?:\.|\\S)(?:[*+]|\{\d*,\})\??")
    unbounded = [(spec.kind, p.regex.pattern) for spec in load_catalogue().values() for p in spec.patterns
                 for found in run.finditer(p.regex.pattern)
                 if p.regex.pattern[found.end():].strip(")$")]
    assert unbounded == []
