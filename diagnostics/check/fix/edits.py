"""Edits a fix asks for, applied on a concrete syntax tree (LibCST) so every line the fix does not
touch keeps its comments, blank lines and formatting byte for byte.

A fix reads the script through its `ScriptModel` (Python's `ast`) and says what to change by
position: replace this expression, add this keyword, wrap this statement in an `if`, insert a
statement before this one. `apply_edits` finds each target in the CST by the same position and
rewrites it; an edit whose target it cannot find makes the whole fix give up (None), never half-apply.
"""
from __future__ import annotations

import ast
import re
import textwrap
from dataclasses import replace

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from mgtutor.diagnostics.check.fix.edit_model import Edit, FixFailed, TooDeep
from mgtutor.diagnostics.check.fix.source_chunks import statement_chunks


def apply_edits(source: str, edits: list[Edit]) -> str | None:
    """The source with every edit applied, or None when one of them cannot be placed."""
    try:
        if len(source) >= WHOLE_MODULE_UP_TO:
            return _apply_in_chunks(source, edits)
        return _apply_to_module(source, edits)
    except (cst.ParserSyntaxError, FixFailed, ValueError, TypeError, SyntaxError):
        return None
    except (RecursionError, MemoryError):
        raise TooDeep() from None


def _apply_to_module(source: str, edits: list[Edit]) -> str:
    module = cst.parse_module(source)
    module = _apply(module, [e for e in edits if e.kind != "import"])
    return _add_imports(module, [e.code for e in edits if e.kind == "import"]).code


# LibCST reads a big script slowly (minutes for 2 MB, and gigabytes): past this size only the top-level
# statements an edit touches are parsed, each as a module of its own, and put back between the others'
# untouched lines (the imports go into the head: the docstring and imports up to the first other statement).
WHOLE_MODULE_UP_TO = 100_000


def _apply_in_chunks(source: str, edits: list[Edit]) -> str:
    lines = re.findall(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$", source)
    chunks = statement_chunks(ast.parse(source), len(lines))
    for removed in sorted({e.at.line for e in edits if e.kind == "remove" and e.at is not None}, reverse=True):
        index = next((i for i, (a, b) in enumerate(chunks) if a <= removed <= b), len(chunks) - 1)
        if index + 1 < len(chunks):  # what is above a removed statement goes above the next one
            chunks[index:index + 2] = [(chunks[index][0], chunks[index + 1][1])]
    wanted: dict[int, list[Edit]] = {}
    for edit in edits:
        index = 0 if edit.kind == "import" else next(
            (i for i, (first, last) in enumerate(chunks) if first <= edit.at.line <= last), -1)  # type: ignore[union-attr]
        if index < 0:
            raise FixFailed(f"no statement at line {edit.at.line}")  # type: ignore[union-attr]
        wanted.setdefault(index, []).append(edit)
    out = []
    for index, (first, last) in enumerate(chunks):
        text = "".join(lines[first - 1:last])
        if index in wanted:
            shift = first - 1
            moved = [e if e.at is None else replace(e, at=replace(e.at, line=e.at.line - shift,
                                                                      end_line=e.at.end_line and e.at.end_line - shift))
                     for e in wanted[index]]
            text = _apply_to_module(text, moved)
        out.append(text)
    return "".join(out)


def _apply(module: cst.Module, edits: list[Edit]) -> cst.Module:
    if not edits:
        return module
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    positions = wrapper.resolve(PositionProvider)
    by_start: dict[tuple[int, int], list[cst.CSTNode]] = {}
    ends: dict[cst.CSTNode, tuple[int, int]] = {}
    for node, pos in positions.items():
        by_start.setdefault((pos.start.line, pos.start.column), []).append(node)
        ends[node] = (pos.end.line, pos.end.column)
    changes: dict[cst.CSTNode, list[Edit]] = {}
    for edit in edits:
        assert edit.at is not None
        candidates = by_start.get((edit.at.line, edit.at.column), [])
        if edit.at.end_line:
            candidates = [n for n in candidates if ends[n] == (edit.at.end_line, edit.at.end_column)]
        changes.setdefault(_target(candidates, edit), []).append(edit)
    return module.visit(_Rewriter(changes))


STATEMENT_KINDS = {"wrap", "before", "after", "remove", "statement", "try_finally"}


def _target(candidates: list[cst.CSTNode], edit: Edit) -> cst.CSTNode:
    """The node an edit means among those starting at its position: the outermost expression for
    replace, the call for keyword edits, the statement line (one statement on it) otherwise."""
    if edit.kind in STATEMENT_KINDS:
        for node in candidates:
            if isinstance(node, cst.SimpleStatementLine):
                if len(node.body) != 1:
                    raise FixFailed("several statements on one line")
                return node
            if isinstance(node, cst.BaseCompoundStatement):
                return node
    elif edit.kind in ("keyword", "drop_keyword"):
        calls = [n for n in candidates if isinstance(n, cst.Call)]
        if calls:
            return calls[0]  # outermost first: positions come in tree order
    else:
        exprs = [n for n in candidates if isinstance(n, cst.BaseExpression)]
        if exprs:
            return exprs[0]
    raise FixFailed(f"no target for {edit.kind} at {edit.at}")


def statement(code: str) -> cst.BaseStatement:
    return cst.parse_statement(textwrap.dedent(code).strip("\n") + "\n")


def statements(code: str) -> list[cst.SimpleStatementLine | cst.BaseCompoundStatement]:
    return list(cst.parse_module(textwrap.dedent(code).strip("\n") + "\n").body)


class _Rewriter(cst.CSTTransformer):
    def __init__(self, changes: dict[cst.CSTNode, list[Edit]]) -> None:
        super().__init__()
        self.changes = changes
        self.removed: set[int] = set()   # placeholders of removed statements, dropped by their block

    def on_leave(self, original: cst.CSTNode, updated: cst.CSTNode):
        if self.removed and isinstance(updated, (cst.Module, cst.IndentedBlock)):
            updated = self._drop_removed(updated)
        edits = self.changes.get(original)
        if not edits:
            return updated
        result: cst.CSTNode = updated
        before: list[cst.BaseStatement] = []
        after: list[cst.BaseStatement] = []
        for edit in edits:
            if edit.kind == "replace":
                new = cst.parse_expression(edit.code)
                lpar, rpar = getattr(result, "lpar", None), getattr(result, "rpar", None)
                result = new.with_changes(lpar=lpar, rpar=rpar) if lpar and not getattr(new, "lpar", None) else new
            elif edit.kind == "keyword":
                result = _with_keyword(result, edit.name, edit.code)
            elif edit.kind == "drop_keyword":
                result = _without_keyword(result, edit.name)
            elif edit.kind == "wrap":
                assert isinstance(result, cst.SimpleStatementLine | cst.BaseCompoundStatement)
                inner = result.with_changes(leading_lines=[])
                result = cst.If(test=cst.parse_expression(edit.code), body=cst.IndentedBlock([inner]),
                                leading_lines=result.leading_lines)
            elif edit.kind == "before":
                before.extend(statements(edit.code))
            elif edit.kind == "after":
                after.extend(statements(edit.code))
            elif edit.kind == "try_finally":  # the block's body under try: … + barrier, finally: code
                assert isinstance(result, cst.If) and isinstance(result.body, cst.IndentedBlock)
                last, cleanup = edit.name, edit.code
                body = [*result.body.body, *statements(last)] if last else list(result.body.body)
                guarded = cst.Try(body=cst.IndentedBlock(body), finalbody=cst.Finally(
                    body=cst.IndentedBlock(statements(cleanup))))
                result = result.with_changes(body=result.body.with_changes(body=[guarded]))
            elif edit.kind == "statement":
                result = statement(edit.code).with_changes(leading_lines=result.leading_lines)  # type: ignore[attr-defined]
            elif edit.kind == "remove":  # its blank lines and comments stay, above the next statement
                placeholder = cst.SimpleStatementLine([cst.Pass()], leading_lines=getattr(result, "leading_lines", ()))
                self.removed.add(id(placeholder))
                return placeholder
        if before:  # the blank lines and comments above the statement now sit above the new code
            before[0] = before[0].with_changes(leading_lines=getattr(result, "leading_lines", ()))
            if not any(isinstance(s, (cst.FunctionDef, cst.ClassDef)) for s in [*before, result]):
                result = result.with_changes(leading_lines=[])  # a def keeps its own blank lines
        if before or after:
            return cst.FlattenSentinel([*before, result, *after])
        return result


    def _drop_removed(self, block: cst.Module | cst.IndentedBlock) -> cst.Module | cst.IndentedBlock:
        body: list = []
        carried: list[cst.EmptyLine] = []
        for stmt in block.body:
            if id(stmt) in self.removed:
                carried += list(getattr(stmt, "leading_lines", ()))
                continue
            if carried:
                stmt = stmt.with_changes(leading_lines=[*carried, *getattr(stmt, "leading_lines", ())])
                carried = []
            body.append(stmt)
        return block.with_changes(body=body) if len(body) != len(block.body) else block


def _with_keyword(call: cst.CSTNode, name: str, code: str) -> cst.Call:
    if not isinstance(call, cst.Call):
        raise FixFailed("not a call")
    value = cst.parse_expression(code)
    args = list(call.args)
    for i, arg in enumerate(args):
        if arg.keyword is not None and arg.keyword.value == name:
            args[i] = arg.with_changes(value=value)
            return call.with_changes(args=args)
    new = cst.Arg(value=value, keyword=cst.Name(name), equal=cst.AssignEqual(
        whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")))
    if args:
        last = args[-1]
        if last.comma is cst.MaybeSentinel.DEFAULT or isinstance(last.comma, cst.MaybeSentinel):
            args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        else:  # a trailing comma (often before a closing paren on its own line): keep the layout, the
            # new argument on a line of its own, indented like the others
            new = new.with_changes(comma=last.comma)
            between = args[-2].comma.whitespace_after if len(args) > 1 and isinstance(args[-2].comma, cst.Comma) \
                else last.comma.whitespace_after
            args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=between))
    return call.with_changes(args=[*args, new])


def _without_keyword(call: cst.CSTNode, name: str) -> cst.Call:
    if not isinstance(call, cst.Call):
        raise FixFailed("not a call")
    args = [a for a in call.args if not (a.keyword is not None and a.keyword.value == name)]
    if len(args) == len(call.args):
        raise FixFailed(f"no keyword {name}")
    if args and call.args[-1] not in args:  # the dropped one was last: the new last takes its comma
        args[-1] = args[-1].with_changes(comma=call.args[-1].comma)
    return call.with_changes(args=args)


def _add_imports(module: cst.Module, imports: list[str]) -> cst.Module:
    """Each missing import goes into the script's first group of imports, in alphabetical place
    (after the docstring and any `from __future__`), so the name is bound before any code runs."""
    body = list(module.body)
    for code in dict.fromkeys(imports):
        if not _has_import(module.with_changes(body=body), code):
            stmt = statement(code)
            assert isinstance(stmt, cst.SimpleStatementLine)
            body = _insert_import(body, stmt, code)
    return module.with_changes(body=body)


def _insert_import(body: list, new: cst.SimpleStatementLine, code: str) -> list:
    """Into the group of imports of the same package (`torch` beside `torch`), else the first
    group, in alphabetical place by module name."""
    start = 0
    while start < len(body) and (_is_docstring(body[start], start) or _is_future(body[start])):
        start += 1
    groups: list[list[int]] = []
    index = start
    while index < len(body) and _is_import(body[index]):
        if index == start or body[index].leading_lines:
            groups.append([])
        groups[-1].append(index)
        index += 1
    key = _module_key(new)
    if not groups:
        if start > 0:
            new = new.with_changes(leading_lines=[cst.EmptyLine()])
        return [*body[:start], new, *body[start:]]
    group = next((g for g in groups if any(_module_key(body[i]).split(".")[0] == key.split(".")[0] for i in g)),
                 groups[0])
    place = next((i for i in group if _module_key(body[i]) > key), group[-1] + 1)
    if place == group[0]:  # it becomes the group's first line: it takes the group's spacing
        new = new.with_changes(leading_lines=body[place].leading_lines)
        body = [*body[:place], body[place].with_changes(leading_lines=[]), *body[place + 1:]]
    return [*body[:place], new, *body[place:]]


def _module_key(stmt: cst.CSTNode) -> str:
    """`import torch.distributed as dist` -> "torch.distributed"; `from torch.utils.data import X` ->
    "torch.utils.data"."""
    small = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) and stmt.body else stmt
    if isinstance(small, cst.Import):
        return cst.Module(body=[]).code_for_node(small.names[0].name).lower()
    if isinstance(small, cst.ImportFrom) and small.module is not None:
        return cst.Module(body=[]).code_for_node(small.module).lower()
    return ""


def _has_import(module: cst.Module, code: str) -> bool:
    wanted = cst.Module(body=statements(code)).code.strip()
    return any(isinstance(s, cst.SimpleStatementLine) and cst.Module(body=[s.with_changes(leading_lines=[])])
               .code.strip() == wanted for s in module.body)


def _is_docstring(stmt: cst.CSTNode, index: int) -> bool:
    return index == 0 and isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and \
        isinstance(stmt.body[0], cst.Expr) and isinstance(stmt.body[0].value, (cst.SimpleString, cst.ConcatenatedString))


def _is_future(stmt: cst.CSTNode) -> bool:
    return isinstance(stmt, cst.SimpleStatementLine) and any(
        isinstance(s, cst.ImportFrom) and isinstance(s.module, cst.Name) and s.module.value == "__future__"
        for s in stmt.body)


def _is_import(stmt: cst.CSTNode) -> bool:
    return isinstance(stmt, cst.SimpleStatementLine) and any(isinstance(s, (cst.Import, cst.ImportFrom))
                                                             for s in stmt.body)
