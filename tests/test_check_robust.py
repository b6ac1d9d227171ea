"""`mgtutor check` on input that is not a clean Python 3 script: one clear message, never a traceback."""
from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.conftest import examples

from mgtutor.diagnostics.check.script import MAX_BYTES, CheckError, CheckFinding, check_bytes, check_file, check_source

SNIPPETS = sorted((Path(__file__).parent / "data" / "check").glob("*.py"))
SNIPPET_TEXTS = [p.read_text() for p in SNIPPETS]


def outcome(data: bytes) -> list[CheckFinding] | CheckError:
    try:
        return check_bytes(data, "s.py")
    except CheckError as exc:
        return exc


def assert_sane(result, text_lines: int | None = None) -> None:
    if isinstance(result, CheckError):
        message = str(result)
        assert message and "\n" not in message and "Traceback" not in message
        return
    for finding in result:
        assert finding.severity in ("error", "warning", "advice")
        assert finding.line >= 1 and (text_lines is None or finding.line <= text_lines + 1)


@pytest.mark.parametrize("data, expected", [
    (b"print 'hello'\n", "Python 2"),
    (b"try:\n    pass\nexcept ValueError, e:\n    pass\n", "Python 2"),
    (b"mode = 0755\n", "Python 2"),
    (b"def f(:\n    pass\n", "line 1: syntax error"),
    (b"x = '\xff\xfe caf\xe9'\n", "not utf-8 text"),
    (b"import torch\x00\n", "NUL"),
    (b"# -*- coding: klingon -*-\nx = 1\n", "unknown encoding"),
    (b"(" * 300, "nested"),
    (b"x = " + b"-" * 200_000 + b"1\n", "nested too deeply"),
])
def test_unreadable_scripts_give_one_clear_line(data, expected):
    result = outcome(data)
    assert isinstance(result, CheckError)
    assert expected.lower() in str(result).lower()
    assert_sane(result)


def test_huge_file_is_refused_before_reading(tmp_path):
    path = tmp_path / "huge.py"
    path.write_bytes(b"x = 1\n" * (MAX_BYTES // 6 + 10))
    with pytest.raises(CheckError, match="MB"):
        check_file(path)


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(CheckError, match="no such file"):
        check_file(tmp_path / "nope.py")
    with pytest.raises(CheckError, match="directory"):
        check_file(tmp_path)


def test_other_encodings_are_read_like_python_reads_them():
    latin = "# -*- coding: latin-1 -*-\nname = 'café'\n".encode("latin-1")
    assert check_bytes(latin) == []
    assert check_bytes("\ufeffimport torch\n".encode("utf-8")) == []
    assert check_source("") == []


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=400))
def test_any_bytes_give_findings_or_one_clear_error(data):
    assert_sane(outcome(data))


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.sampled_from(list("()[]{}:=,.'\"\\#\n\t abcdrnkt0123+-*/@if") + [
    "import torch\n", "dist.barrier()", "if rank == 0:\n    ", "def f(rank):\n    ", "for x in loader:\n    ",
    "DataLoader(ds, shuffle=True)", "loss.backward()", "torch.save(m, p)", ".item()", "else:\n", "return\n",
    "lambda: ", "class C:\n    ", "print ", "except E, e:"]), max_size=120).map("".join))
def test_python_like_text_gives_findings_or_one_clear_error(text):
    assert_sane(outcome(text.encode("utf-8")), text.count("\n") + 1)


@settings(max_examples=examples(200), deadline=None)
@given(st.integers(0, len(SNIPPET_TEXTS) - 1), st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 8),
                                                                    st.text(max_size=6)), max_size=4))
def test_mutated_training_scripts_give_findings_or_one_clear_error(index, edits):
    text = SNIPPET_TEXTS[index]
    for position, cut, insert in edits:  # delete a few characters and insert a few at random places
        at = position % (len(text) + 1)
        text = text[:at] + insert + text[at + cut:]
    assert_sane(outcome(text.encode("utf-8", "surrogatepass")), text.count("\n") + 1)


def test_deep_but_valid_code_does_not_crash():
    rng = random.Random(7)
    chain = " + ".join(rng.choice(["rank", "x", "1"]) for _ in range(400))
    source = f"import torch.distributed as dist\ndist.init_process_group('gloo')\nv = {chain}\nif v == 0:\n    dist.barrier()\n"
    assert_sane(outcome(source.encode()))
