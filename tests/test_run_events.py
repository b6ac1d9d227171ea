"""The one event reader: typed events per schema, torn lines wait, broken lines are counted and skipped."""
from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from tests.conftest import examples

from mgtutor.training.runs.events.writer import (
    EVENT_TYPES,
    BenchResultEvent,
    BenchRowsEvent,
    ErrorEvent,
    EventReader,
    EventWriter,
    RendezvousEvent,
    StepEvent,
    encode,
    parse_event,
    read_events,
)

ROW = {"bytes": 8, "count": 2, "dtype": "float", "time_us": 12.5, "algbw_gbps": 0.0, "busbw_gbps": 0.0,
       "wrong": None, "in_place": False, "graph": False, "method": "allreduce"}


def test_each_type_becomes_its_dataclass_and_keeps_unknown_fields(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    writer = EventWriter(path, rank=1)
    writer.emit("step", step=3, epoch=0, loss=float("nan"), samples_per_s=10.5, data_wait_s=0.01, custom="x")
    writer.emit("rendezvous", phase="timeout", missing=[2, 3], timeout_s=8)
    writer.emit("error", phase="init", message="RuntimeError: boom")
    writer.close()
    step, rendezvous, error = read_events(path)
    assert isinstance(step, StepEvent) and (step.rank, step.step, step.loss) == (1, 3, "nan")
    assert step.extra == {"custom": "x"} and step.line == 1 and '"custom":"x"' in step.text()
    assert isinstance(rendezvous, RendezvousEvent) and rendezvous.missing == [2, 3]
    assert rendezvous.extra == {"timeout_s": 8}
    assert isinstance(error, ErrorEvent) and error.description == "RuntimeError: boom"


def test_the_benchs_rows_have_their_own_schema() -> None:
    rows = parse_event(encode("step", 0, kind="allreduce", size=8, rows=[ROW, dict(ROW, in_place=True)]))
    assert isinstance(rows, BenchRowsEvent) and rows.size == 8 and rows.rows[1].in_place is True
    assert rows.to_json()["rows"][0] == ROW
    done = parse_event(encode("result", 0, kind="allreduce", backend="gloo", world_size=2, device="CPU",
                              graph=False, oop_method="copy"))
    assert isinstance(done, BenchResultEvent) and done.oop_method == "copy"
    assert parse_event(encode("step", 0, kind="allreduce", size=8, rows=[{"bytes": "8"}])) is None


def test_schema_violations_are_counted_and_skipped(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    lines = [
        json.dumps({"rank": 0, "t": 1.0, "type": "step", "step": 1}),
        json.dumps({"rank": 0, "t": 1.0, "type": "step", "step": "one"}),  # step must be an int
        json.dumps({"rank": 0, "t": 1.0, "type": "step"}),  # step is required
        json.dumps({"rank": True, "t": 1.0, "type": "start"}),  # a bool is not a rank
        json.dumps({"rank": 0, "t": 1.0, "type": "teleport"}),  # unknown type
        json.dumps({"rank": 0, "type": "start"}),  # no time
        json.dumps([1, 2]),
        "not json at all",
        "",
        json.dumps({"rank": 0, "t": 2.0, "type": "checkpoint", "action": "saved", "step": 1}),
    ]
    path.write_text("\n".join(lines) + "\n")
    reader = EventReader(path)
    events = reader.poll()
    assert [e.type for e in events] == ["step", "checkpoint"]
    assert [e.line for e in events] == [1, 10]
    assert reader.skipped == 7  # the blank line is not an event, nor an error


def test_a_torn_line_waits_for_its_end(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    reader = EventReader(path)
    assert reader.poll() == []  # no file yet
    line = encode("step", 0, step=1, loss=2.0)
    path.write_bytes(line[:7])
    assert reader.poll() == [] and reader.skipped == 0
    with path.open("ab") as handle:
        handle.write(line[7:] + encode("epoch", 0, epoch=0, steps=1))
    assert [e.type for e in reader.poll()] == ["step", "epoch"]
    assert reader.poll() == []


@settings(max_examples=examples(60), deadline=None)
@given(st.lists(st.one_of(
    st.builds(lambda s: encode("step", 0, step=s, loss=0.5), st.integers(0, 10**6)),
    st.builds(lambda r: encode("start", r, pid=r + 1), st.integers(0, 64)),
    st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"") + b"\n"),
), max_size=20), st.lists(st.integers(1, 50), max_size=10))
def test_any_split_of_the_file_reads_the_same_events(tmp_path_factory, chunks: list[bytes], cuts: list[int]) -> None:
    """However the bytes arrive (any cut points, garbage lines), the reader never raises and yields
    exactly what one read of the whole file yields."""
    data = b"".join(chunks)
    path = tmp_path_factory.mktemp("ev") / "events.jsonl"
    path.write_bytes(b"")
    reader, got, at = EventReader(path), [], 0
    for cut in cuts:
        with path.open("ab") as handle:
            handle.write(data[at:at + cut])
        at += cut
        got += reader.poll()
    with path.open("ab") as handle:
        handle.write(data[at:])
    got += reader.poll()
    whole = EventReader(path)
    assert got == whole.read_all() and reader.skipped == whole.skipped
    assert all(e.type in EVENT_TYPES for e in got)
