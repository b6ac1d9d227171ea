"""`mgtutor check`: find the classic multi-GPU mistakes in a training script by reading it.

The script is parsed with Python's `ast`, never imported or run. The rules live in rules.py
(data) and match/core.py (the evidence each looks for). Public API:

    check_file(path) -> list[CheckFinding]          raises CheckError for unreadable input; follows the
                                                    calls into modules it imports from its own folder
    check_source(text, filename) -> list[CheckFinding]
    check_folder(dir) (check.folder) -> FolderReport  the scripts of a project and the modules they import
    findings_with_tags(findings, *tags), findings_for_symptom(findings, "one-gpu-busy")
"""
from __future__ import annotations

import ast
import io
import re
import tokenize
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path

from mgtutor.training.foundation.i18n import _
from mgtutor.diagnostics.check.script_model import ScriptModel
from mgtutor.diagnostics.check.project import Project
from mgtutor.diagnostics.check.rules import RULES, RULES_BY_ID, SEVERITIES, SYMPTOM_TAGS, Rule
from mgtutor.training.foundation.safe_io import NotARegularFile, read_regular

MAX_BYTES = 2_000_000   # a training script is kilobytes; beyond this it is data or generated code


class CheckError(Exception):
    """The script cannot be checked (unreadable, not Python 3, too big); one line for the user."""


@dataclass(frozen=True)
class CheckFinding:
    rule: str
    severity: str
    file: str
    line: int
    message: str
    fix: str
    lesson: str
    column: int = 0
    code: str = ""
    why: str = ""
    fix_before: str = ""
    fix_after: str = ""
    tags: tuple[str, ...] = field(default=())
    confidence: str = "medium"   # high | medium | low (see check.rules)
    caveat: str = ""             # why this finding may not apply (then it is advice)
    fix_safety: str = ""         # "safe" | "unsafe": `check --fix` can rewrite it; "" by hand

    def to_json(self) -> dict:
        data = asdict(self)
        data["tags"] = list(self.tags)
        return data


def check_file(path: str | Path, project: Project | None = None) -> list[CheckFinding]:
    """One script; calls into modules it imports from its own folder (`utils`, `util.misc`) are
    followed the way Python would import them, through `project` (default: the script's folder)."""
    path = Path(path)
    return check_bytes(read_script(path), str(path), project or Project(path.parent))


def read_script(path: Path) -> bytes:
    """The script's bytes, or CheckError with one line that says why not (check, --fix and convert)."""
    try:
        if path.is_dir():
            raise CheckError(_("{path} is a directory, not a Python script").format(path=path))
        size = path.stat().st_size
        if size > MAX_BYTES:
            raise CheckError(too_big(str(path), size))
        data = read_regular(path)  # a FIFO or device is refused, never waited on
    except CheckError:
        raise
    except FileNotFoundError:
        raise CheckError(_("no such file: {path}").format(path=path)) from None
    except PermissionError:
        raise CheckError(_("cannot read {path}: permission denied").format(path=path)) from None
    except NotARegularFile as exc:
        raise CheckError(_("cannot read {path}: {why}").format(path=path, why=exc.strerror)) from None
    except OSError as exc:
        raise CheckError(_("cannot read {path}: {why}").format(path=path, why=exc.strerror or exc)) from None
    return data


def too_big(filename: str, size: int) -> str:
    return _("{file} is {mb:.1f} MB; mgtutor check reads scripts up to {limit} MB").format(
        file=filename, mb=size / 1e6, limit=MAX_BYTES // 1_000_000)


def check_bytes(data: bytes, filename: str = "<script>", project: Project | None = None) -> list[CheckFinding]:
    if len(data) > MAX_BYTES:
        raise CheckError(too_big(filename, len(data)))
    return check_source(decode_source(data, filename), filename, project)


def decode_source(data: bytes, filename: str = "<script>") -> str:
    """Bytes to text the way Python would read them (a coding cookie, else UTF-8)."""
    try:
        encoding, _first_lines = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:
        if "unknown encoding" in str(exc):
            raise CheckError(f"{filename}: {exc.msg}") from None
        encoding = "utf-8"  # a bad byte in the first lines: let the decode below say where
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as exc:
        raise CheckError(_("{file}: not {encoding} text (byte 0x{byte:02x} at offset {offset}); is this a Python "
                           "script?").format(file=filename, encoding=encoding, byte=data[exc.start],
                                             offset=exc.start)) from None
    except LookupError:
        raise CheckError(_("{file}: unknown source encoding {encoding!r}").format(file=filename,
                                                                                  encoding=encoding)) from None


def check_source(text: str, filename: str = "<script>", project: Project | None = None) -> list[CheckFinding]:
    if len(text) > MAX_BYTES:
        raise CheckError(_("{file} is too large to check ({count} characters)").format(file=filename, count=len(text)))
    model = project.cached(Path(filename)) if project is not None else None
    if model is None or model.source != text:
        tree = parse(text, filename)
    try:
        if model is None or model.source != text:
            model = ScriptModel(tree, text, filename)
            if project is not None:
                project.remember(model, Path(filename))
        findings = [f for rule in RULES for f in run_rule(rule, model, filename)]
    except RecursionError:
        raise CheckError(_("{file}: nested too deeply to analyse").format(file=filename)) from None
    order = {s: i for i, s in enumerate(SEVERITIES)}
    return sorted(findings, key=lambda f: (order[f.severity], f.line, f.rule))


def parse(text: str, filename: str) -> ast.Module:
    if "\0" in text:
        raise CheckError(_("{file}: contains NUL bytes; not a Python script").format(file=filename))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escape sequences etc. are the script's business
            return ast.parse(text, filename=filename)
    except SyntaxError as exc:
        where = _("line {line}: ").format(line=exc.lineno) if exc.lineno else ""
        if looks_like_python2(text, exc):
            raise CheckError(_("{file}: {where}Python 2 syntax ({why}); mgtutor check reads Python 3 scripts").format(
                file=filename, where=where, why=exc.msg)) from None
        raise CheckError(_("{file}: {where}syntax error: {why}").format(file=filename, where=where,
                                                                       why=exc.msg)) from None
    except (MemoryError, RecursionError):
        raise CheckError(_("{file}: nested too deeply for Python's parser; not a training script?").format(
            file=filename)) from None
    except ValueError as exc:
        raise CheckError(_("{file}: cannot be parsed ({why})").format(file=filename, why=str(exc)[:100])) from None


PY2_LINE = re.compile(r"^\s*(print\s+[\"'\w]|exec\s+[\"'\w]|except\s+[\w.]+\s*,\s*\w+\s*:|raise\s+\w+\s*,)"
                      r"|\bur[\"']|<>|^\s*\w+\s*=\s*`")


def looks_like_python2(text: str, exc: SyntaxError) -> bool:
    if any(sign in (exc.msg or "") for sign in ("Missing parentheses in call to", "leading zeros in decimal")):
        return True
    if exc.lineno and 0 < exc.lineno <= len(text.splitlines()):
        return bool(PY2_LINE.search(text.splitlines()[exc.lineno - 1]))
    return False


def run_rule(rule: Rule, model: ScriptModel, filename: str | None = None) -> list[CheckFinding]:
    found, seen = [], set()
    for node, message, *caveat in rule.find(model):
        line = getattr(node, "lineno", 1)
        if (line, message) in seen:
            continue
        seen.add((line, message))
        unsure = caveat[0] if caveat else ""
        before, after = (rule.fix_for(node, model) if rule.fix_for else None) or (rule.before, rule.after)
        fixable = not unsure or (rule.fix_unsure is not None and rule.fix_unsure(node, model))
        safety = rule.safety if rule.rewrite is not None and fixable and _rewrites(rule, node, model) else ""
        found.append(CheckFinding(
            rule=rule.id, severity="advice" if unsure else rule.severity, file=filename or model.filename, line=line,
            confidence="low" if unsure else rule.confidence, caveat=_(unsure),
            column=getattr(node, "col_offset", 0), message=_(message or rule.title), fix=_(rule.fix),
            lesson=rule.lesson, code=model.line(line).strip(), why=_(rule.why),
            fix_before=before, fix_after=after, tags=rule.tags, fix_safety=safety))
    return found


def _rewrites(rule: Rule, node: ast.AST, model: ScriptModel) -> bool:
    """Whether `check --fix` knows how to rewrite this finding (a fix never breaks the check)."""
    try:
        return bool(rule.rewrite(node, model)) if rule.rewrite else False
    except (LookupError, ValueError, AttributeError, TypeError, RecursionError):
        return False


def has_errors(findings: list[CheckFinding]) -> bool:
    return any(f.severity == "error" for f in findings)


def findings_with_tags(findings: list[CheckFinding], *tags: str) -> list[CheckFinding]:
    wanted = set(tags)
    return [f for f in findings if wanted & set(f.tags)]


def findings_for_symptom(findings: list[CheckFinding], symptom: str) -> list[CheckFinding]:
    """The findings that can explain a Troubleshoot symptom: one-gpu-busy, same-data, no-speedup, hang."""
    if symptom not in SYMPTOM_TAGS:
        raise KeyError(f"unknown symptom {symptom!r}; known: {', '.join(SYMPTOM_TAGS)}")
    return findings_with_tags(findings, *SYMPTOM_TAGS[symptom])


def rule(rule_id: str) -> Rule:
    return RULES_BY_ID[rule_id]


def summary_counts(findings: list[CheckFinding]) -> dict[str, int]:
    return {s: sum(1 for f in findings if f.severity == s) for s in SEVERITIES}
