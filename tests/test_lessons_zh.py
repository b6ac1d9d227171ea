"""The lessons in Simplified Chinese say what the English says: section by section the same headings,
the same code byte for byte, and the glossary's words where the English uses its terms."""
from __future__ import annotations

import hashlib
import re

import pytest
from babel.messages.pofile import read_po

from mgtutor.lessons.loader import SOURCE_NOTE, all_lessons
from tests.conftest import REPO

GLOSSARY = REPO / "docs/glossary-zh.md"
PO = REPO / "training/foundation/locale/zh/LC_MESSAGES/mgtutor.po"
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
INLINE_CODE = re.compile(r"`[^`\n]+`")
PLACEHOLDER = re.compile(r"\{[^{}]*\}")
# flags, paths and file names, kebab-case names: said as they are, so no glossary word is owed for them
AS_IS = re.compile(r"--?[A-Za-z][\w-]*|\S*[/\\]\S*|\S+\.\w+\b|\b[a-z]+(?:-[a-z]+)+\b")


def headings(text: str) -> list[str]:
    """The heading levels in order ('#', '##', …), outside code."""
    return [line.split(" ", 1)[0] for line in FENCE.sub("", text).splitlines() if re.match(r"#{1,6} ", line)]


def code_blocks(text: str) -> list[str]:
    """Fenced blocks, and indented blocks (four spaces after a blank line), in order."""
    blocks = FENCE.findall(text)
    lines = FENCE.sub("", text).splitlines()
    current: list[str] = []
    for index, line in enumerate(lines):
        starts = not current and line.startswith("    ") and (index == 0 or not lines[index - 1].strip())
        if starts or (current and line.startswith("    ")):
            current.append(line)
        elif current:
            blocks.append("\n".join(current))
            current = []
    if current:
        blocks.append("\n".join(current))
    return blocks


def prose(text: str) -> str:
    """What a reader reads as sentences: no code blocks, no inline code."""
    kept = [line for line in FENCE.sub("", text).splitlines() if not line.startswith("    ")]
    return INLINE_CODE.sub("", "\n".join(kept))


def checked_terms() -> list[tuple[re.Pattern[str], list[str]]]:
    """(English pattern, the Chinese words any one of which must appear) for the glossary's checked rows."""
    terms = []
    for line in GLOSSARY.read_text(encoding="utf-8").splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[2] == "**checked**":
            english = [word.strip() for word in cells[0].split(",")]
            chinese = [re.sub(r"\s*\(.*?\)", "", word).strip() for word in cells[1].split(",")]
            words = "|".join(re.escape(word).replace(r"\-", "[- ]").replace(r"\ ", "[- ]") for word in english)
            terms.append((re.compile(rf"\b(?:{words})(?:s|es)?\b", re.I), chinese))
    return terms


def missing_terms(english: str, chinese: str) -> list[str]:
    return [pattern.pattern for pattern, words in checked_terms()
            if pattern.search(english) and not any(word in chinese for word in words)]


LESSONS = all_lessons()


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda lesson: lesson.id)
def test_each_chinese_explanation_has_the_english_sections_and_code(lesson):
    english = (lesson.path / "explanation.md").read_text(encoding="utf-8")
    chinese = (lesson.path / "explanation.zh.md").read_text(encoding="utf-8")
    assert headings(chinese) == headings(english)
    assert code_blocks(chinese) == code_blocks(english), "code is never translated, not even a comment"
    assert re.search(r"[\u4e00-\u9fff]", prose(chinese)), "the prose is Chinese"


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda lesson: lesson.id)
def test_each_chinese_explanation_was_made_from_the_english_as_it_is_now(lesson):
    """An English explanation edited after its translation fails here until the Chinese says the same
    again; then its first line gets the new hash (`sha256sum explanation.md`, first 12 hex digits)."""
    english = (lesson.path / "explanation.md").read_bytes()
    first_line = (lesson.path / "explanation.zh.md").read_text(encoding="utf-8").split("\n", 1)[0]
    assert first_line == f"{SOURCE_NOTE}{hashlib.sha256(english).hexdigest()[:12]} -->", \
        f"{lesson.id}: explanation.md changed since explanation.zh.md was translated from it"


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda lesson: lesson.id)
def test_each_chinese_explanation_uses_the_glossary(lesson):
    english = prose((lesson.path / "explanation.md").read_text(encoding="utf-8"))
    chinese = prose((lesson.path / "explanation.zh.md").read_text(encoding="utf-8"))
    assert not missing_terms(english, chinese)


def test_the_catalogue_uses_the_glossary():
    with PO.open("rb") as po:
        pairs = [(m.id, m.string) for m in read_po(po) if m.id and isinstance(m.id, str) and m.string]
    def words(msgid: str) -> str:  # what the English says, without code or placeholders ({backend})
        return AS_IS.sub("", PLACEHOLDER.sub("", INLINE_CODE.sub("", msgid)))

    offending = [(mid, missing_terms(words(mid), text)) for mid, text in pairs if missing_terms(words(mid), text)]
    assert not offending, offending[:5]


def test_the_comparisons_catch_what_they_are_for():
    english = "# T\n\nThe all-reduce of gradients.\n\n    torchrun --nproc-per-node 2 x.py\n\n## S\n"
    assert code_blocks(english) == ["    torchrun --nproc-per-node 2 x.py"]
    assert headings(english) == ["#", "##"]
    assert missing_terms(prose(english), "梯度的归约") == [checked_terms()[3][0].pattern]
    assert not missing_terms(prose(english), "梯度的全归约 (all-reduce)")
    assert code_blocks("# T\n\n    torchrun --nproc-per-node 2 x.py  # 两个进程\n") != code_blocks(english)


def test_chinese_text_uses_no_marks_rich_measures_wrong():
    """Rich counts `…` and curly quotes as one cell where some CJK terminals draw two (Rich#4197): the
    Chinese says `...` and 「」 (code spans keep what the English writes)."""
    def prose_marks(text: str) -> list[str]:
        return re.findall(r"[…“”‘’]", INLINE_CODE.sub("", text))

    with PO.open("rb") as po:
        wrong = [m.id for m in read_po(po) if m.id and isinstance(m.string, str) and prose_marks(m.string)]
    assert not wrong, wrong[:5]
    for zh in sorted(REPO.glob("lessons/*/explanation.zh.md")):
        assert not prose_marks(zh.read_text(encoding="utf-8")), zh
