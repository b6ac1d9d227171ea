"""The block reader (prefilter + only the lines it points at) finds exactly what reading every line finds."""
from __future__ import annotations

import io
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.conftest import examples

from mgtutor.diagnostics.failures.logs import blockscan
from mgtutor.diagnostics.failures.catalogue import load_catalogue
from mgtutor.diagnostics.failures.classify import build_findings
from mgtutor.diagnostics.failures.logs.logparse import lines_of, raw_lines
from mgtutor.diagnostics.failures.logs.prefilter import Prefilter, trie_regex, trigger_of
from mgtutor.diagnostics.failures.logs.scan import Scanner

LOGS = Path(__file__).parent / "data" / "logs"


def _every_line(data: bytes, chunk: int = blockscan.CHUNK) -> list[dict]:
    scanner = Scanner(load_catalogue())
    for lineno, raw in raw_lines(io.BytesIO(data), chunk):
        for line in lines_of(raw, "x.log", lineno):
            scanner.feed(line)
    return [f.to_dict() for f in build_findings(scanner)]


def _by_blocks(data: bytes) -> list[dict]:
    scanner = Scanner(load_catalogue())
    blockscan.scan_handle(scanner, io.BytesIO(data), "x.log")
    return [f.to_dict() for f in build_findings(scanner)]


@pytest.mark.parametrize("name", sorted(p.name for p in LOGS.glob("*.log")))
def test_every_fixture_gives_the_same_findings(name: str) -> None:
    data = (LOGS / name).read_bytes()
    assert _by_blocks(data) == _every_line(data)


pieces = st.sampled_from([
    (LOGS / "cuda_oom_interleaved.log").read_bytes()[:400], (LOGS / "shm_exhausted_k8s.log").read_bytes()[:600],
    (LOGS / "collective_timeout_dump_signal.log").read_bytes()[:900], (LOGS / "host_oom_killed.log").read_bytes(),
    (LOGS / "dataset_download_failed.log").read_bytes()[:3000], b"[rank1]: Traceback (most recent call last):\n",
    b"[rank1]:   File \"x.py\", line 3\n", b"[rank1]: ValueError: bad\n", b"[rank0]: step 1 loss 2.0\n",
    b"\x1b[31m", b"\r", b"\n", b"[rank3]: ", b"x" * 300, b"CUDA out of memory. Tried to allocate 2.00 GiB\n",
    b"[rank0]: batch indices [1, 2, 3]\n", b"[rank1]: batch indices [1, 2, 3]\n", "é".encode(),
])


@settings(max_examples=examples(150), deadline=None)
@given(st.lists(pieces, max_size=30), st.sampled_from([64, 257, 4096]))
def test_block_edges_never_change_the_findings(chunks: list[bytes], block: int) -> None:
    data = b"".join(chunks)
    with pytest.MonkeyPatch.context() as patch:  # small blocks and line pieces put every edge case on a boundary
        patch.setattr(blockscan, "BLOCK", block)
        patch.setattr(blockscan, "CHUNK", block * 2)
        assert _by_blocks(data) == _every_line(data, block * 2)


def test_triggers_start_at_a_rare_character_and_cover_their_needle() -> None:
    assert trigger_of("exitcode") == "xitcode"
    assert trigger_of("cuda out of memory. tried to allocate ") in "cuda out of memory. tried to allocate "
    prefilter = Prefilter(["exitcode  : -7", "exitcode"])
    assert prefilter.literals == ["xitcode"]  # a longer trigger that contains a kept one adds nothing
    assert prefilter.positions(b"  exitcode  : 1\n") == [3]
    assert trie_regex(["abc", "abd", "x"]) == "(?:ab(?:c|d)|x)"


def test_a_catalogue_pattern_without_a_literal_must_say_what_to_look_for() -> None:
    from mgtutor.diagnostics.failures.catalogue import parse_catalogue

    kind = {"kind": "k", "weight": 1, "lesson": "l", "summary": "s", "fix": "f", "patterns": ["(?:a|b)+"]}
    with pytest.raises(ValueError, match="triggers"):
        parse_catalogue({"kinds": [kind]})
    kind["patterns"] = [{"re": "(?:a|b)+", "triggers": ["ab"]}]
    assert parse_catalogue({"kinds": [kind]})["k"].patterns[0].triggers == ("ab",)


def test_a_long_line_with_escapes_is_cut_where_raw_lines_cuts_it() -> None:
    # the first line puts the second across a read edge, so the second comes whole in a block with its
    # line end: 156 raw bytes, 106 once the escapes go; cut after cleaning, the OOM message would stay whole
    data = b"[rank0]: step 0 ok\n" + b"\x1b[31m" * 10 + b"x" * 60 + b"CUDA out of memory. Tried to allocate 2.00 GiB\n" + b"[rank0]: step 1\n"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(blockscan, "BLOCK", 64)
        patch.setattr(blockscan, "CHUNK", 128)
        assert _by_blocks(data) == _every_line(data, 128)
