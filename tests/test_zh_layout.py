"""Chinese laid out as Chinese (issue 47, "Layout"): a line breaks between Chinese characters but never
before closing punctuation (，。) nor inside a name (`NCCL_DEBUG`); a hard-wrapped lesson line gives no
space between two Chinese characters; lines are measured in terminal cells (a Chinese character takes
two), in the doctor's text and in argparse's usage; section titles end in the Chinese colon."""
from __future__ import annotations

import re

import pytest

from mgtutor.diagnostics.doctor.hostinfo import cpu_lines
from mgtutor.lessons.loader import all_lessons
from mgtutor.training.foundation.i18n import cell_width, set_language
from mgtutor.training.foundation.linebreak import CLOSING, OPENING, join_soft_breaks, wrap_cells
from mgtutor.tui.cli import main

CJK = "\u3000-\u303f\u4e00-\u9fff\uff00-\uffef"
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
STRAY_SPACE = re.compile(rf"[{CJK}] [{CJK}]")
PUNCTUATION_SPACE = re.compile(r"[、，。：；！？）」] \S|\S [（「]")
NAME = re.compile(r"[A-Za-z_][\w.=/()-]*[\w)]")  # an identifier, a call, a flag's value, a path
SENTENCE = ("mgtutor 读到 NCCL_DEBUG=INFO 时，会在每个 rank 的日志里（stderr）找出 NCCL 选用的传输方式：P2P/IPC、"
            "SHM 或 NET；其中 dist.barrier() 还没有返回的 rank，就是「卡住」的那一个。显存用了 100 %，不是 99 %。")


def broken_names(lines: list[str], text: str, width: int) -> list[str]:
    """Names of `text` that no line holds whole (cut by a line break), of those that fit in a line."""
    names = [name for name in NAME.findall(text) if cell_width(name) <= width]
    return [name for name in names if not any(name in line for line in lines)]


def line_starts(lines: list[str]) -> list[str]:
    """Lines that start with closing punctuation, or whose line before ends with opening punctuation."""
    starts = [line for line in lines if line.strip()[:1] in CLOSING]
    return starts + [line for line in lines[:-1] if line.rstrip()[-1:] in OPENING]


@pytest.mark.parametrize("width", [17, 20, 24, 40, 76])
def test_a_chinese_sentence_breaks_as_chinese_at_every_width(width):
    lines = wrap_cells(SENTENCE, width)
    assert all(cell_width(line) <= width for line in lines), lines
    assert line_starts(lines) == [] and broken_names(lines, SENTENCE, width) == []
    assert "".join(lines).replace(" ", "") == SENTENCE.replace(" ", "")


def test_a_name_wider_than_the_line_is_folded_rather_than_overflowing():
    lines = wrap_cells("设置 NCCL_SOCKET_IFNAME=eth0 后", 10)
    assert all(cell_width(line) <= 10 for line in lines) and "".join(lines) == "设置NCCL_SOCKET_IFNAME=eth0 后"


def test_english_breaks_at_spaces_as_before():
    assert wrap_cells("the quick brown fox jumps over the lazy dog", 15) == ["the quick brown", "fox jumps over",
                                                                          "the lazy dog"]
    assert wrap_cells("a list of words that wraps", 12, subsequent_indent="  ") == ["a list of", "  words that",
                                                                                  "  wraps"]


def test_a_line_break_between_chinese_characters_is_no_space():
    source = ("每个 rank 都构建同样的 DataLoader，\n每个 rank 读到的就是\n同样的批。\n"
              "- 列表的一项\n  续行\n- `x`\n，之后\n## 标题\n正文\n"
              "```\nprint('code')\n```\nN 块 GPU\n的活")
    joined = join_soft_breaks(source)
    assert "DataLoader，每个 rank 读到的就是同样的批。\n" in joined
    assert "- 列表的一项续行\n- `x`，之后\n## 标题\n正文\n```\nprint('code')\n```\nN 块 GPU\n的活" in joined
    assert join_soft_breaks("不是\n**哪个** rank、\nMTU 不同。\n2. 下一项\n机器：\n`mgtutor run`") == \
        "不是**哪个** rank、MTU 不同。\n2. 下一项机器：`mgtutor run`"  # the item goes on: Markdown joins it too


LESSONS_ZH = [lesson.id for lesson in all_lessons()]


@pytest.mark.parametrize("lesson_id", LESSONS_ZH)
def test_every_chinese_lesson_reads_without_stray_spaces_or_bad_breaks(lesson_id):
    """The explanation as the Lessons screen and `lessons show` get it: no line break left between two
    Chinese characters, no line of a paragraph starting with closing punctuation; wrapped at the lesson
    pane's width, no line starts with closing punctuation and no name is cut."""
    set_language("zh")
    lesson = next(lesson for lesson in all_lessons() if lesson.id == lesson_id)
    text = FENCE.sub("", lesson.explanation())
    source = (lesson.path / "explanation.zh.md").read_text(encoding="utf-8")
    assert re.findall(rf"[{CJK}]\n[ \t]*[{CJK}]", text) == []
    assert [line for line in text.splitlines() if line.strip()[:1] in CLOSING] == []
    spaced = {pair for line in source.splitlines() for pair in STRAY_SPACE.findall(line.replace("*", ""))}
    assert set(STRAY_SPACE.findall(text.replace("*", ""))) <= spaced  # only the spaces the translator wrote
    punctuated = {pair for line in source.splitlines() for pair in PUNCTUATION_SPACE.findall(line)}
    assert set(PUNCTUATION_SPACE.findall(text)) <= punctuated  # "、 MTU": no space after Chinese punctuation
    for block in re.split(r"\n\s*\n|\n(?=\s*(?:[-*] |\d+\. ))", text):  # paragraphs and list items
        if block.startswith(("    ", "#", "|")):
            continue
        flat = " ".join(block.split())
        lines = wrap_cells(flat, 46)  # the lesson pane at 80×24
        assert line_starts(lines) == [] and broken_names(lines, flat, 46) == [], lines


def test_no_source_line_breaks_inside_inline_code():
    """A line break inside `code` would show as a space in it, in either language: every line of prose
    opens and closes its code spans."""
    for path in sorted(all_lessons()[0].path.parent.glob("*/explanation.zh.md")):
        prose = FENCE.sub("", path.read_text(encoding="utf-8"))
        assert [line for line in prose.splitlines() if line.count("`") % 2] == [], path


def test_the_doctors_cpu_lines_fit_80_cells_in_chinese():
    set_language("zh")
    cpu = {"vendor": "GenuineIntel", "family": 6, "model": 143, "stepping": 8, "sockets": 2, "cores_per_socket": 56,
           "threads_per_core": 2, "numa_nodes": 8, "hypervisor": "yes (the guest does not say which)",
           "caches": [{"level": 1, "type": "Data", "size": "48K"}, {"level": 2, "type": "Unified", "size": "2048K"},
                      {"level": 3, "type": "Unified", "size": "107520K"}],
           "flags": ["sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512_vnni", "avx512_bf16",
                     "avx512_fp16", "avx_vnni", "amx_tile", "amx_bf16", "amx_int8"]}
    lines = cpu_lines(cpu)
    assert all(cell_width(line) <= 80 for line in lines), lines
    assert len(lines) > 4 and line_starts(lines) == []
    assert all(any(flag in line.split() for line in lines) for flag in cpu["flags"])  # no flag cut in two


def test_usage_continues_under_its_first_argument_and_titles_end_in_the_chinese_colon(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    with pytest.raises(SystemExit):
        main(["--lang", "zh", "train", "--help"])
    out = capsys.readouterr().out
    usage = out.split("\n\n")[0].splitlines()
    assert usage[0].startswith("用法：mgtutor train [") and len(usage) > 3
    first_argument = cell_width(usage[0][:usage[0].index("[")])
    assert all(cell_width(line) - cell_width(line.lstrip()) == first_argument for line in usage[1:]), usage
    assert all(cell_width(line) <= 80 for line in usage)
    titles = [line for line in out.splitlines() if line and not line.startswith(" ") and line.endswith(("：", ":"))]
    assert "选项：" in titles and all(title.endswith("：") for title in titles), titles
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    english = capsys.readouterr().out
    assert english.startswith("usage: mgtutor train [") and "\noptions:\n" in english


@pytest.mark.parametrize("lesson_id", ["05-distributed-sampler", "09-data-loading", "15-multi-node"])
def test_lessons_show_prints_chinese_prose_broken_as_chinese_within_the_terminal(capsys, monkeypatch, lesson_id):
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["--lang", "zh", "lessons", "show", lesson_id]) == 0
    out = capsys.readouterr().out
    out = out[out.index("目标："):out.index("\n步骤：")]  # the goal and the lesson's text
    lesson = next(lesson for lesson in all_lessons() if lesson.id == lesson_id)
    source = (lesson.path / "explanation.zh.md").read_text(encoding="utf-8")
    code = {line for block in FENCE.findall(source) for line in block.splitlines()}
    prose = [line for line in out.splitlines() if line not in code]
    assert all(cell_width(line) <= 80 for line in prose), [line for line in prose if cell_width(line) > 80]
    assert line_starts(prose) == [] and all(line in out.splitlines() for line in code)
    spaced = {pair for line in source.splitlines() for pair in STRAY_SPACE.findall(line)}
    assert {pair for line in prose for pair in STRAY_SPACE.findall(line)} <= spaced
    spans = [span for span in re.findall(r"`[^`\n]+`", FENCE.sub("", source)) if cell_width(span) <= 76]
    assert [span for span in spans if not any(span in line for line in prose)] == [], "a code span broken in two"
