"""The one JSON decoder (training/foundation/json_decode.py): parsing with limits, one set of type rules
for events, records and schemas, and one error that names the field and says why."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mgtutor.diagnostics.schema import errors
from mgtutor.training.foundation.json_decode import (
    MAX_DEPTH,
    Bounds,
    DecodeError,
    decode,
    decode_lenient,
    fit,
    parse,
    shown,
)
from mgtutor.training.runs.events.reader import parse_event
from mgtutor.training.runs.records.types import RunMeta, RunResult
from tests.conftest import examples


@dataclass
class Inner:
    code: int | None = None


@dataclass
class Outer:
    name: str
    size: Annotated[int, Bounds(0, 10)] = 0
    tags: Annotated[list[str], Bounds(items=3)] = field(default_factory=list)
    inner: Inner | None = None
    rows: tuple[Inner, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)


@pytest.mark.parametrize("text, why", [
    ("[" * 100_000 + "]" * 100_000, "nested deeper than"),
    ("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), "nested deeper than"),
    ('{"world_size": ' + "9" * 400 + "}", "an integer of 400 digits"),
    ('{"started": NaN}', "NaN is not a JSON number"),
    ('{"started": -Infinity}', "-Infinity is not a JSON number"),
    ('{"started": 1e400}', "out of range"),
    ('{"started": 1', "not JSON"),
    (b'{"a": "\xff"}', "not JSON"),
])
def test_text_past_a_limit_is_one_decode_error_that_says_which(text: str | bytes, why: str) -> None:
    with pytest.raises(DecodeError, match=why):
        parse(text)


def test_json_within_the_limits_parses_as_the_standard_library_does() -> None:
    text = '{"a": [1, 2.5, -3, true, null, "x"], "b": {"c": 1e308}, "n": 99999999999999999999}'
    assert parse(text) == {"a": [1, 2.5, -3, True, None, "x"], "b": {"c": 1e308}, "n": 99999999999999999999}
    assert parse("[" * MAX_DEPTH + "]" * MAX_DEPTH) is not None


def test_a_strict_decode_names_the_first_field_that_does_not_fit() -> None:
    cases = [({"name": "x", "size": 11}, "$.size", "not within 0..10"),
             ({"name": "x", "size": True}, "$.size", "expected an integer, got a boolean"),
             ({"name": "x", "tags": ["a", "b", "c", "d"]}, "$.tags", "4 items (at most 3)"),
             ({"name": "x", "tags": ["a", 5]}, "$.tags[1]", "expected a string"),
             ({"name": "x", "inner": {"code": "1"}}, "$.inner.code", "expected an integer or null"),
             ({"name": "x", "rows": [{"code": 1}, {"code": 2.5}]}, "$.rows[1].code", "expected an integer"),
             ({"size": 1}, "$.name", "missing"),
             ([1], "$", "expected an object, got an array")]
    for data, where, why in cases:
        with pytest.raises(DecodeError) as caught:
            decode(Outer, data)
        assert caught.value.where == where and why in caught.value.why, (data, caught.value)


def test_a_strict_decode_builds_the_dataclass_and_keeps_unknown_keys() -> None:
    got = decode(Outer, {"name": "x", "size": 2.0, "rows": [{"code": 1}], "inner": None, "new": [1]})
    assert got == Outer(name="x", size=2, rows=(Inner(1),), extra={"new": [1]})
    assert isinstance(got.size, int)


def test_a_lenient_decode_leaves_each_wrong_field_at_its_default_and_lists_it() -> None:
    got, wrong = decode_lenient(Outer, {"name": "x", "size": -1, "tags": "t", "inner": {"code": 1e300}})
    assert got == Outer(name="x", inner=Inner())
    assert [(w.field, w.value) for w in wrong] == [("size", -1), ("tags", "t"), ("inner.code", 1e300)]


def test_a_number_that_no_int64_holds_is_no_int_and_nan_is_no_float() -> None:
    for value, hint in ((2 ** 63, int), (1e300, int), (float("nan"), float), (float("inf"), float | None), ("1", float)):
        with pytest.raises(DecodeError):
            fit(value, hint)
    assert fit(2 ** 63 - 1, int) == 2 ** 63 - 1 and fit(3, float) == 3 and fit(None, float | None) is None


def test_a_value_is_shown_short_even_when_it_holds_millions() -> None:
    assert shown(list(range(2_000_000))) == "[0, 1, 2, 3, ...]"
    assert shown("yesterday") == "'yesterday'" and len(shown("x" * 1000)) <= 40


def test_events_records_and_schemas_share_the_rules() -> None:
    """An int field takes no bool and no fraction in all three; a number takes no NaN."""
    assert parse_event('{"rank": 0, "t": 1, "type": "step", "step": true}') is None
    assert parse_event('{"rank": 0, "t": 1, "type": "step", "step": 1.5}') is None
    assert parse_event('{"rank": 0, "t": 1, "type": "step", "step": 2.0}').step == 2
    meta = RunMeta.from_json({"world_size": True, "nnodes": 1.5})
    assert meta.world_size == 0 and "world_size is True" in meta.problem and "nnodes is 1.5" in meta.problem
    assert errors(True, {"type": "integer"}) and errors(1.5, {"type": "integer"}) and errors(float("nan"), {"type": "number"})
    assert errors(2, {"type": "integer"}) == errors(2.0, {"type": "number"}) == []


def test_a_record_with_numbers_out_of_bounds_keeps_its_other_fields() -> None:
    meta = RunMeta.from_json({"label": "x", "world_size": 10 ** 9, "started": 1e300, "supervisor_pid": 2 ** 40})
    assert (meta.label, meta.world_size, meta.started, meta.supervisor_pid) == ("x", 0, None, None)
    assert meta.problem == "wrong type: world_size is 1000000000, started is 1e+300, supervisor_pid is 1099511627776"
    result = RunResult.from_json({"ranks": [{"rank": i} for i in range(5000)], "duration_s": 1.5})
    assert result.ranks == [] and result.duration_s == 1.5 and "ranks is [" in (result.problem or "")


@settings(max_examples=examples(200), deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=4), kids, max_size=4),
                    max_leaves=30))
def test_any_json_value_decodes_into_a_record_or_says_why_never_raising_anything_else(value: Any) -> None:
    meta = RunMeta.from_json(value if isinstance(value, dict) else {"target": value, "started": value})
    assert meta.problem is None or meta.problem.startswith("wrong type: ")
    try:
        decode(Outer, value)
    except DecodeError as exc:
        assert exc.where.startswith("$")
