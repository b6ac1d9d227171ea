"""The catalogue follows the glossary's settled words (docs/glossary-zh.md, "Settled words", issue 47): where
a message's English says a term, its Chinese says none of the words the glossary rules out for it
(更新 for newer, 本地帧 for native frames, 插槽 for a CPU socket, 导师 for the tutor, 发现 for a finding…),
and the wrong or misleading sentences the issue lists read as they should."""
from __future__ import annotations

import re

import pytest
from babel.messages.pofile import read_po

from mgtutor.training.foundation.i18n import _, set_language
from tests.test_lessons_zh import AS_IS, GLOSSARY, INLINE_CODE, LESSONS, PLACEHOLDER, PO, prose

# Ruled-out words that are wrong in any sense (更新 is also "to update", 构建 "to build", 任务 "a task"):
# the lessons' Chinese says none of them anywhere.
NEVER_RIGHT = ("导师", "插槽", "本地帧", "卷申请", "批次", "批量", "修复办法", "就地", "原址", "异址", "更旧")


def settled_rows() -> list[tuple[str, re.Pattern[str], list[str], list[str]]]:
    """(English, its pattern, the Chinese words allowed, the words ruled out) for each settled row."""
    text = GLOSSARY.read_text(encoding="utf-8")
    table = text[text.index("## Settled words"):]
    rows = []
    for line in table.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) != 4 or cells[0] in ("English", "---") or not cells[2]:
            continue
        english = [w.strip() for w in re.split(r"[,/]", re.sub(r"\(.*?\)", "", cells[0])) if w.strip()]
        words = "|".join(re.escape(word).replace(r"\-", "[- ]").replace(r"\ ", "[- ]") for word in english)
        allowed = [re.sub(r"\s*\(.*?\)", "", w).strip() for w in cells[1].split(",")]
        rows.append((cells[0], re.compile(rf"\b(?:{words})(?:s|es)?\b", re.I), allowed,
                     [w.strip() for w in cells[2].split(",")]))
    return rows


def said_words(text: str) -> str:
    """What a message says in words: no code, placeholders, flags, paths or kebab-case names."""
    return AS_IS.sub(" ", PLACEHOLDER.sub(" ", INLINE_CODE.sub(" ", text)))


def catalogue() -> list[tuple[str, str]]:
    with PO.open("rb") as po:
        return [(m.id, m.string) for m in read_po(po) if isinstance(m.id, str) and m.id and isinstance(m.string, str)
                and m.string]


# A ruled-out word is right where it translates another word of the same message: 任务 is a task (srun's
# "one task per node" beside a job), 更新 an update ("update the driver" beside "or older").
OTHER_SENSE = {"任务": re.compile(r"\btasks?\b", re.I), "更新": re.compile(r"\bupdat", re.I)}


def ruled_out(rows, pairs) -> list[tuple[str, str, str]]:
    """(English term, msgid, the word ruled out) for each message that says a word the glossary rules out."""
    found = []
    for term, pattern, allowed, banned in rows:
        for msgid, msgstr in pairs:
            if not pattern.search(said_words(msgid)):
                continue
            for word in (w for w in banned if not (w in OTHER_SENSE and OTHER_SENSE[w].search(msgid))):
                chinese = said_words(msgstr)
                for longer in (w for w in allowed if word in w):  # 持久卷申领 says 卷申领 and is right
                    chinese = chinese.replace(longer, " ")
                found += [(term, msgid, word)] if word in chinese else []
    return found


def test_the_glossary_settles_each_term_the_issue_lists():
    terms = " ".join(term for term, *_rest in settled_rows())
    for term in ("batch", "finding", "build", "job", "in-place", "fix", "PVC", "newer", "native frames", "socket",
                 "tutor", "loss"):
        assert term in terms, term


def test_the_catalogue_says_no_word_the_glossary_rules_out():
    offending = ruled_out(settled_rows(), catalogue())
    assert offending == [], offending[:8]


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda lesson: lesson.id)
def test_no_lesson_says_a_word_that_is_never_right(lesson):
    chinese = prose((lesson.path / "explanation.zh.md").read_text(encoding="utf-8"))
    with PO.open("rb") as po:
        strings = {m.id: m.string for m in read_po(po)}
    words = [chinese] + [strings.get(text, "") for text in (lesson.title, lesson.goal) if isinstance(text, str)]
    assert [word for word in NEVER_RIGHT if any(word in text for text in words)] == []


def test_the_check_catches_a_ruled_out_word():
    rows = settled_rows()
    assert ("newer / older (runs)", "[ newer", "更新") in ruled_out(rows, [("[ newer", "[ 更新")])
    assert ruled_out(rows, [("the batch size", "批次大小")]) and not ruled_out(rows, [("the batch size", "批大小")])
    assert ruled_out(rows, [("{claim} claims", "两个卷申领")]) and not ruled_out(rows, [("a claim", "持久卷申领")])
    assert not ruled_out(rows, [("`--batch-size` {batch}", "批大小 {batch}")])
    assert not ruled_out(rows, [("one task per node; the job", "每个节点一个任务；作业")])
    assert ruled_out(rows, [("one rank per node; the job", "每个节点一个 rank；任务")])


@pytest.mark.parametrize("msgid, says, not_said", [
    ("[ newer", "较新", "更新"),
    ("the 200 newer runs", "较新", "更新"),
    ("] older", "较早", "更早"),
    ("{count} socket(s)", "路 CPU", "插槽"),
    ("start the tutor (TUI)", "mgtutor", "导师"),
    (" after {error}", "起因", "之后"),
])
def test_the_wrong_words_the_issue_lists_are_fixed(msgid, says, not_said):
    set_language("zh")
    assert says in _(msgid) and not_said not in _(msgid), _(msgid)


def test_native_frames_acs_and_the_doctors_marks_read_as_meant():
    pairs = dict(catalogue())
    native = [text for msgid, text in pairs.items() if "native frames" in msgid]
    assert len(native) >= 2 and all("原生栈帧" in text for text in native)
    acs = [(msgid, text) for msgid, text in pairs.items() if "PCIe ACS" in msgid and "passthrough" in msgid]
    assert acs and all("iommu=pt" in msgid and "ACS" in text and "iommu=pt" in text and "直通" in text
                       for msgid, text in acs), acs
    doctor = [(msgid, text) for msgid, text in pairs.items() if msgid.startswith("Check everything multi-GPU")]
    assert doctor and all("✓" in msgid and "✗" in msgid and "✓" in text and "✗" in text for msgid, text in doctor)
