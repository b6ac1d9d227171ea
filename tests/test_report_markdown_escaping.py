"""What a run wrote reaches the GitHub issue body as text, never as markup (issue 46, item 15; issue 45,
item 7): an exception message's `![x](https://…)` is no image and its `@name` pings nobody, a bare
`<module>` or `<redacted>` is shown instead of eaten as an HTML tag, and no escape sequence, BEL or NUL
of a log reaches a report file. `--markdown -o -` writes the body to standard output.

The body is read as GitHub reads it, with a CommonMark + GFM parser: the text it would show, the images
and the HTML it would find."""
from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from mgtutor.diagnostics.report.markdown_text import html_text, md_code, md_text
from mgtutor.diagnostics.report.render import build, to_markdown, write_report
from mgtutor.training.runs.records.record import RunRecord, runs_root
from tests.conftest import mgtutor_argv

HANG = Path(__file__).parent / "data" / "hang" / "world-size-nccl-lazy"  # rank 0 waits "in <module>"
TOKEN = "hf_" + "Zq7" * 10
MESSAGE = f"bad input ![x](https://evil.example/p.png) cc @octocat in <module> with {TOKEN} **now**"
OUR_TAGS = {"details", "/details", "summary", "/summary", "sub", "/sub"}


@pytest.fixture
def hostile_run(monkeypatch: pytest.MonkeyPatch) -> RunRecord:
    """A failed run whose rank 1 raised with a hostile message, hung on the way, wrote controls."""
    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")
    run = runs_root() / "20261201-100000-bad-py-0001"
    for sub in ("logs", "ranks"):
        (run / sub).mkdir(parents=True)
    (run / "meta.json").write_text(json.dumps({
        "run_id": run.name, "label": "bad.py", "world_size": 2, "backend": "gloo", "status": "failed",
        "started": 1.0, "target": ["bad.py"], "env": {"HF_TOKEN": TOKEN}}))
    (run / "result.json").write_text(json.dumps({
        "run_id": run.name, "status": "failed", "world_size": 2,
        "ranks": [{"rank": 1, "exit_code": 1, "outcome": "failed"}], "first_failure": {"rank": 1, "exit_code": 1}}))
    (run / "logs" / "rank0.stdout.log").write_text("step 1 \x1b[31mred\x1b[0m\x07 and a NUL \x00 here\n")
    (run / "logs" / "rank1.stderr.log").write_text(
        f'Traceback (most recent call last):\n  File "bad.py", line 9, in <module>\n    main()\nValueError: {MESSAGE}\n')
    shutil.copytree(HANG, run / "stacks" / "20261201-100010-1-stall")
    return RunRecord(run)


def shown_by_github(body: str) -> tuple[list[str], list[str], list[str]]:
    """(the text it shows outside code, the HTML tags it finds, the images it draws)."""
    texts, tags, images = [], [], []
    for token in MarkdownIt("gfm-like").parse(body):
        if token.type == "html_block":
            tags += re.findall(r"<(/?[A-Za-z][^\s>]*)", token.content)
            texts.append(html.unescape(re.sub(r"<[^>]*>", "", token.content)))
        line = ""
        for child in token.children or []:
            if child.type == "html_inline":
                tags += re.findall(r"<(/?[A-Za-z][^\s>]*)", child.content)
            elif child.type == "image":
                images.append(child.attrs.get("src", ""))
            elif child.type == "text":
                line += child.content
        texts.append(line)
    return texts, tags, images


def test_the_issue_body_shows_what_the_run_wrote_as_text(hostile_run: RunRecord) -> None:
    body = to_markdown(build(hostile_run, doctor="none"))
    texts, tags, images = shown_by_github(body)
    assert not images, images
    assert set(tags) <= OUR_TAGS, set(tags) - OUR_TAGS  # <module>, <redacted>: shown, not eaten as tags
    shown = "\n".join(texts)
    assert "in <module>" in shown and "<redacted>" in shown and TOKEN not in body
    assert "![x](https://evil.example/p.png)" in shown  # as the script wrote it, readable
    assert not re.search(r"@[A-Za-z0-9]", shown)  # (a zero-width space after each @: no mention)
    assert "rank 0: waits in all_reduce" in shown and "ws_lazy.py:8 in <module>" in shown  # the hang's <summary>


def test_no_escape_bel_or_nul_of_a_log_reaches_a_report_file(hostile_run: RunRecord, tmp_path: Path) -> None:
    for name, markdown in (("report.html", False), ("issue.md", True)):
        data = write_report(hostile_run, tmp_path / name, markdown=markdown, doctor="none").read_bytes()
        assert b"step 1 red" in data, name  # the words stay, their colours go
        assert not re.search(rb"[\x00-\x08\x0b-\x1f\x7f]", data), name


@pytest.mark.parametrize("text, shown", [
    ("`sampler=DistributedSampler(ds)` then [x]", "`sampler=DistributedSampler(ds)` then \\[x\\]"),
    ("no_distributed_sampler and _this_", "no_distributed_sampler and \\_this\\_"),
    ("a & b <c> @d", "a &amp; b &lt;c&gt; @&#8203;d"),
    ("two\nlines\n# not a heading", "two lines # not a heading"),
])
def test_prose_keeps_the_catalogues_code_spans_and_escapes_the_rest(text: str, shown: str) -> None:
    assert md_text(text) == shown


def test_a_code_span_holds_any_backticks_and_html_text_any_tag() -> None:
    assert md_code("a `b` c") == "``a `b` c``" and md_code("`x") == "`` `x ``"
    assert html_text("hang.py:38 in <module> @bob") == "hang.py:38 in &lt;module&gt; @&#8203;bob"


@pytest.mark.integration
@pytest.mark.parametrize("output", ["-", "/dev/stdout"])
def test_markdown_o_dash_writes_standard_output_and_no_file(hostile_run: RunRecord, tmp_path: Path,
                                                              output: str) -> None:
    work = tmp_path / "work"
    work.mkdir()
    done = subprocess.run(mgtutor_argv("report", hostile_run.run_id, "--markdown", "--doctor", "none", "-o", output),
                          cwd=work, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("## 🐛 Describe the bug") and "&lt;module&gt;" in done.stdout
    assert list(work.iterdir()) == []  # no file named "-" (or anything) where it ran
