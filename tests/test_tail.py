"""The log follower: whole lines in order, whatever the writer's chunking."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from tests.conftest import examples

from mgtutor.training.runs.records.record import RunRecord
from mgtutor.training.runs.follow.tail import RunTail, _Follower


def split_all(chunks: list[bytes], tmp_path) -> list[str]:
    path = tmp_path / "log"
    path.write_bytes(b"")
    follower = _Follower(path, 0, "stdout")
    lines: list[str] = []
    for chunk in chunks:
        with path.open("ab") as handle:
            handle.write(chunk)
        lines += follower.read(1 << 20)[0]
    return lines + follower.flush()


def reference(data: bytes) -> list[str]:
    text = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    parts = text.split(b"\n")
    if parts[-1] == b"":
        parts.pop()
    return [p.decode("utf-8", "replace") for p in parts]


def test_crlf_split_across_reads_is_one_line_break(tmp_path):
    assert split_all([b"a\r", b"\nb\n"], tmp_path) == ["a", "b"]
    assert split_all([b"1\r2\r", b"3\n"], tmp_path) == ["1", "2", "3"]
    assert split_all([b"\r", b"", b"\n"], tmp_path) == [""]  # an empty read between the halves


@settings(max_examples=examples(60), deadline=None)
@given(st.lists(st.binary(max_size=40) | st.sampled_from([b"\r", b"\n", b"\r\n", b"\xff\xfe"]), max_size=30))
def test_any_chunking_gives_the_same_lines(tmp_path_factory, chunks):
    tmp_path = tmp_path_factory.mktemp("tail")
    assert split_all(chunks, tmp_path) == reference(b"".join(chunks))


def test_budget_limits_one_poll_but_drain_gets_everything(tmp_path):
    record = RunRecord.create("t", root=tmp_path)
    big = b"y" * 300_000
    record.rank_log(0, "stdout").write_bytes(big + b"\nend")
    tail = RunTail(record, include_torchrun=False)
    assert tail.poll(budget=1 << 16) == []  # the long line is not complete yet
    rest = tail.drain()
    assert rest == [(0, "stdout", big.decode()), (0, "stdout", "end")]
