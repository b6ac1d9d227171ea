"""The leak test's reader (issue 47): the lines of a command's output in Chinese that a Chinese reader
meets in English. A line leaks when it still holds English prose: a run of English words (`english_left`),
or, in a line with no CJK character at all, one lowercase English word that is not a name the glossary
keeps. What stays as it is never leaks: code (a fenced block, the lines of a script or a diff, a generated
file's code), a path, a flag, a number table's row, a command, and what is quoted from a rank or a log
(a `[rank N]` or `[torchrun]` line; text found in the log or script the command read).

    assert leaks(out, quoted=log_text) == []
"""
from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from tests.english_left import KEPT, WORD, english_left, english_words, stripped

CJK = re.compile(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]")
QUOTED_PREFIX = re.compile(r"^\s*(?:\[(?:rank ?\d+|torchrun)\]|r\d+│)")  # a rank's or torchrun's own line
DIFF = re.compile(r"^(?:--- |\+\+\+ |@@ )")
NUMBER = re.compile(r"[~≈]?[\d.,:%×x/+-]*[kKMG]?\s*[¹²³]?")


def number_row(line: str) -> bool:
    """A row of a number table: a Markdown row whose cells after its label are numbers, or a line of columns
    most of which are numbers (a bench's row: 1024  256  float  587.89 ...)."""
    if line.lstrip().startswith("|"):
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        return len(cells) > 2 and all(NUMBER.fullmatch(c) for c in cells[1:])
    columns = line.split()
    return len(columns) >= 4 and sum(bool(NUMBER.fullmatch(c)) for c in columns) >= 0.7 * len(columns)


CHOICES = re.compile(r"\{[\w.,-]+\}|\[[a-z0-9]+(?:-[a-z0-9]+)+\]")  # a flag's choices {tinycnn,resnet18}; a rule id
# A script's line as a finding shows it ("  12 | model = ..."), and a fix's code before and after ("  - x", "  + y")
SCRIPT_LINE = re.compile(r"^\s+(?:\d+ \| |[-+] )")


def _lone_words(line: str) -> list[str]:
    """English words left in a line once code, commands, flags, paths and numbers are gone."""
    words = (piece.strip(".,;:!?()[]{}\"'") for piece in stripped(line).split())
    return [w for w in words if WORD.fullmatch(w) and w.islower() and len(w) >= 3 and w.lower() not in KEPT]


def _quoted(line: str, sources: Iterable[str]) -> bool:
    """The line, or what follows one of its colons (a label, an error's name), is text of a log or script the
    command read: quoted as it is (a cut quote ends with … or ...); or every English run in it is."""
    tails = {line.strip(), line.strip()[1:].strip()}
    tails |= {match.string[match.end():].strip().rstrip("….").strip() for match in re.finditer(r"[：:]", line)}
    if any(len(tail) >= 6 and any(tail in source for source in sources) for tail in tails):
        return True
    english = " ".join(english_words(line)).split()  # or each English word in it is the log's, quoted in a sentence
    return bool(english) and all(any(word in source for source in sources) for word in english)


def _unquoted(line: str, inside: str) -> tuple[str, str]:
    """The line without what stands in double quotes or backticks (code), a quote that a wrapped paragraph
    carried over from the line before included; and the quote mark still open at its end ("" if none)."""
    kept, open_mark = [], inside
    for ch in line:
        if open_mark:
            open_mark = "" if ch == open_mark else open_mark
        elif ch in '"`':
            open_mark = ch
            kept.append(" ")
        else:
            kept.append(ch)
    return "".join(kept), open_mark


def code_of(markdown: str) -> str:
    """A Markdown text's code: its fenced blocks and indented lines (what a translation keeps as it is)."""
    lines, fenced = [], False
    for line in markdown.splitlines():
        if line.strip().startswith("```"):
            fenced = not fenced
        elif fenced or line.startswith("    "):
            lines.append(line)
    return "\n".join(lines)


def leaks(text: str, quoted: str | Iterable[str] = (), allow: tuple[str, ...] = (),
          code: Callable[[str], bool] | None = None) -> list[str]:
    """Each line of `text` a Chinese reader would read in English. `quoted`: the text of what the command
    read (its log, its script), quoted as it is; `allow`: substrings of lines that are data (an OS's name);
    `code`: which lines of a generated file are its code."""
    sources = [quoted] if isinstance(quoted, str) else list(quoted)
    found, fenced, diff, inside = [], False, False, ""
    for shown in text.splitlines():
        line, inside = _unquoted(shown, inside if shown.strip() else "")
        if shown.strip().startswith("```"):
            fenced = not fenced
            continue
        diff = diff or bool(DIFF.match(shown))
        if diff and (shown[:1] in "+- @" or not shown):  # a unified diff's lines are the script's own
            continue
        diff = False
        if (fenced or not line.strip() or QUOTED_PREFIX.match(shown) or number_row(shown) or (code is not None and code(shown))
                or any(a in shown for a in allow) or (sources and _quoted(shown, sources))):
            continue
        line = CHOICES.sub(" ", line)
        if english_left(line) or (not CJK.search(line) and _lone_words(line)):
            found.append(shown)
    return found
