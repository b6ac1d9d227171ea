"""Lines of text for a terminal, measured in cells and broken where Chinese may break.

`textwrap` counts characters (a Chinese character takes two cells) and breaks only at spaces; Rich and
Textual fold a run without spaces (a Chinese sentence) at any cell. Chinese text may break between any
two characters, except before closing punctuation (，。、；：？！）」 never start a line) and after
opening punctuation; a run of Latin text (a word, an identifier, `NCCL_DEBUG`, a path) never breaks.

    wrap_cells("设置 NCCL_DEBUG=INFO 后再运行一次，看它选了哪种传输方式。", 20)

`join_soft_breaks` is for hard-wrapped Chinese prose (the lessons' `explanation.zh.md`): a line break
between two Chinese characters is no space in Chinese, where Markdown would show one; `fit_markdown`
wraps such prose again for a terminal (`mgtutor lessons show`).
"""
from __future__ import annotations

import re
from collections.abc import Iterator
from functools import lru_cache

from mgtutor.training.foundation.i18n import cell_width as _text_width

# Punctuation that never starts a line (Chinese, then ASCII after a Chinese character), and that never ends one.
CLOSING = frozenset("，。、；：？！）」』》〉】〕〗〙〛’”…‥·％" ",.;:!?)]}%")
OPENING = frozenset("（「『《〈【〔〖〘〚‘“" "([{")


@lru_cache(maxsize=8192)
def _char_width(ch: str) -> int:
    return _text_width(ch)


def cell_width(text: str) -> int:
    """The cells `text` takes (i18n.cell_width, a character's width looked up once: a TUI lays text out
    again at every resize)."""
    return sum(map(_char_width, text))


def wide(ch: str) -> bool:
    """A character that takes two cells: Chinese, Japanese, Korean, full-width forms and punctuation."""
    return _char_width(ch) == 2


def may_break(before: str, after: str) -> bool:
    """Whether a line may break between two adjacent characters that have no space between them."""
    if after in CLOSING or before in OPENING:
        return False
    return wide(before) or wide(after)


def _units(text: str) -> Iterator[tuple[int, int]]:
    """(start, end) of each piece no line breaks inside, with the spaces after it."""
    start, size = 0, len(text)
    while start < size:
        end = start
        while end < size and text[end].isspace():  # leading spaces: only the text's own, at its start
            end += 1
        end += 1
        while True:
            while end < size and not text[end].isspace() and not may_break(text[end - 1], text[end]):
                end += 1
            spaces = end
            while end < size and text[end].isspace():
                end += 1
            if spaces < end < size and text[end] in CLOSING:  # "100 %，": no line starts with "%"
                end += 1
                continue
            break
        yield start, min(end, size)
        start = end


def break_offsets(text: str, width: int, fold: bool = True, first_width: int | None = None) -> list[int]:
    """Where each line after the first starts (character offsets), for lines of at most `width` cells
    (`first_width` for the first). The spaces at a break stay at the end of the line before it; a piece
    wider than a whole line is folded at a cell when `fold`, else left to overflow."""
    offsets: list[int] = []
    limit = width if first_width is None else first_width
    line_start, used = 0, 0
    for start, end in _units(text):
        piece = text[start:end]
        visible = piece.rstrip()
        if used + cell_width(visible) <= limit:
            used += cell_width(piece)
            continue
        if start > line_start:
            offsets.append(start)
            line_start, used, limit = start, 0, width
        if cell_width(visible) <= limit or not fold:
            used = cell_width(piece)
            continue
        for index, ch in enumerate(visible, start=start):
            if used + cell_width(ch) > limit and index > line_start:
                offsets.append(index)
                line_start, used, limit = index, 0, width
            used += cell_width(ch)
        used += cell_width(piece[len(visible):])
    return offsets


def wrap_cells(text: str, width: int, subsequent_indent: str = "") -> list[str]:
    """`text` (one paragraph, whitespace collapsed) as lines of at most `width` cells, the lines after
    the first starting with `subsequent_indent` (counted in the width)."""
    indent = cell_width(subsequent_indent)
    cuts = [0, *break_offsets(text, max(width - indent, 1), first_width=width), len(text)]
    lines = [text[a:b].rstrip() for a, b in zip(cuts, cuts[1:])]
    return [line if n == 0 else subsequent_indent + line for n, line in enumerate(lines) if line or n == 0]


_HEADING_OR_ROW = re.compile(r"\s{0,3}(?:#|\|)")


def join_soft_breaks(markdown: str) -> str:
    """Hard-wrapped Markdown prose with each line break that falls between two Chinese characters (or
    before closing, after opening punctuation) taken out, with the next line's indent: Markdown would
    show a space there. Code never changes: a code line has no Chinese at its ends (code is never
    translated), and headings and table rows are left alone."""
    lines = markdown.split("\n")
    out = [lines[0]]
    for line in lines[1:]:
        previous, following = out[-1], line.lstrip()
        if previous and following and _joins(previous, following) and not _HEADING_OR_ROW.match(previous):
            out[-1] = previous + following
        else:
            out.append(line)
    return "\n".join(out)


def _joins(previous: str, following: str) -> bool:
    if previous[-1].isspace() or _HEADING_OR_ROW.match(following) or following.startswith(("```", "~~~")):
        return False  # two spaces at a line's end are a hard break; a heading or table row starts a block
    before, after = previous.rstrip(EMPHASIS)[-1:], following.lstrip(EMPHASIS)[:1]  # 是\n**每个** is 是**每个**
    if not before or not after or _LIST_ITEM.match(following) or following.startswith(">"):
        return False  # a list item or a quote starts a block of its own
    punctuation = (before in CLOSING or before in OPENING) and wide(before) or after in CLOSING | OPENING and wide(after)
    return (wide(before) and wide(after)) or punctuation  # Chinese punctuation takes no space on either side


EMPHASIS = "*_"


_LIST_ITEM = re.compile(r"(\s*(?:[-*+]|\d+[.)])\s+)")
_CODE_SPAN = re.compile(r"`[^`]+`")
_KEPT_SPACE = "\ue000"  # a private-use character: one cell, no break opportunity


def fit_markdown(markdown: str, width: int) -> str:
    """Markdown prose reflowed for a terminal `width` cells wide, broken as Chinese breaks: each paragraph
    and list item (its lines under its text) wrapped anew; code, headings and table rows as they are."""
    out: list[str] = []
    block: list[str] = []
    verbatim = False  # inside a fence, or an indented code block

    def flush() -> None:
        if block:
            marker = _LIST_ITEM.match(block[0])
            lead = marker.group(1) if marker else block[0][:len(block[0]) - len(block[0].lstrip())]
            text = " ".join([block[0].rstrip()] + [line.strip() for line in block[1:]])
            indent = " " * cell_width(lead)
            text = _CODE_SPAN.sub(lambda code: _kept_whole(code.group(), width - len(indent)), text)
            lines = wrap_cells(text, width, subsequent_indent=indent)
            out.extend(line.replace(_KEPT_SPACE, " ") for line in lines)
            block.clear()

    for line in join_soft_breaks(markdown).split("\n"):
        fence = line.lstrip().startswith(("```", "~~~"))
        indented_code = line.startswith("    ") and not block and (not out or not out[-1].strip())
        if fence or verbatim or indented_code or not line.strip() or _HEADING_OR_ROW.match(line):
            flush()
            out.append(line)
            verbatim = (not verbatim if fence else verbatim and bool(line.strip())) or indented_code
            continue
        if _LIST_ITEM.match(line):
            flush()
        block.append(line)
    flush()
    return "\n".join(out)


def _kept_whole(code: str, width: int) -> str:
    """A code span that fits in a line is one piece (`mgtutor runs show ID`); a longer one breaks at its spaces."""
    return code.replace(" ", _KEPT_SPACE) if cell_width(code) <= width else code

