"""What a fix asks to change, by position: the edits themselves, without the syntax tree that applies them.

The rules and fixes build `Edit`s while `check` reads a script; only applying them (fix/edits.py) needs
LibCST, which takes a fifth of a second to import: every command that merely checks a script (`run`,
`check` without `--fix`) never pays for it.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass


@dataclass(frozen=True)
class Where:
    """A node's start in characters (ast counts columns in UTF-8 bytes; LibCST in characters)."""
    line: int
    column: int
    end_line: int = 0      # 0: match by the start alone (statements)
    end_column: int = 0


@dataclass(frozen=True)
class Edit:
    """kind: replace (the expression at `at` becomes `code`) · keyword (add `name=code` to the call at
    `at`, or replace its value) · drop_keyword (remove `name` from the call) · wrap (put the statement
    at `at` under `if code:`) · before / after (insert statement `code` around the statement at `at`) ·
    remove (the statement at `at`) · statement (the statement at `at` becomes `code`) · try_finally (the
    body of the `if` at `at` runs under try:, ending with statement `name`, and `code` in its finally) · import (`code` is an import statement the fix needs)."""
    kind: str
    at: Where | None = None
    code: str = ""
    name: str = ""


def where(node: ast.AST, lines: list[str]) -> Where:
    line, end = getattr(node, "lineno", 1), getattr(node, "end_lineno", 0) or 0
    column = _chars(lines, line, getattr(node, "col_offset", 0))
    if isinstance(node, ast.stmt) or not end:
        return Where(line, column)
    return Where(line, column, end, _chars(lines, end, getattr(node, "end_col_offset", 0) or 0))


def _chars(lines: list[str], line: int, offset: int) -> int:
    raw = lines[line - 1] if 0 < line <= len(lines) else ""
    return len(raw.encode("utf-8")[:offset].decode("utf-8", errors="ignore"))


class TooDeep(Exception):
    """The script nests deeper than LibCST's parser can follow (it recurses once per bracket)."""


class FixFailed(Exception):
    """An edit's target is not where the ast said (an unusual layout): the fix is skipped."""
