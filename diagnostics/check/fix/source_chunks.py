"""A big script cut into pieces LibCST can read one at a time (edits.py rewrites only the pieces an edit
touches): each top-level statement with the comments and blank lines above it, statements that share a line
kept together, the head (docstring, imports and the first other statement) as one piece."""
from __future__ import annotations

import ast


def statement_chunks(tree: ast.Module, line_count: int) -> list[tuple[int, int]]:
    """(first line, last line) of each top-level statement with the comments and blank lines above it;
    statements that share a line go together; the first chunk is the head (docstring, imports and the
    first other statement), the last takes the lines after the last statement."""
    spans: list[list[int]] = []
    head = head_length(tree)
    for index, stmt in enumerate(tree.body):
        start = min([stmt.lineno, *(d.lineno for d in getattr(stmt, "decorator_list", []))])
        end = stmt.end_lineno or stmt.lineno
        joins = not spans or index <= head or start <= spans[-1][1]
        if joins and spans:
            spans[-1][1] = max(spans[-1][1], end)
        else:
            spans.append([(spans[-1][1] + 1) if spans else 1, end])
    if not spans:
        return [(1, line_count)]
    spans[0][0] = 1
    spans[-1][1] = max(spans[-1][1], line_count)
    return [(a, b) for a, b in spans]


def head_length(tree: ast.Module) -> int:
    """The index of the first statement that is neither the docstring nor an import."""
    for index, stmt in enumerate(tree.body):
        docstring = index == 0 and isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)
        if not docstring and not isinstance(stmt, (ast.Import, ast.ImportFrom)):
            return index
    return len(tree.body)
