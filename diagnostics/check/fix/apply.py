"""`mgtutor check --diff / --fix`: the rules' rewrites applied to the user's own script.

One finding is fixed at a time: check, rewrite the first fixable finding, check the new text again.
A rewrite is kept only when the result still parses and its finding is gone, so a second `--fix`
finds nothing left to do (idempotent) and a rewrite that does not help is never written. Safe fixes
keep what the script does where it already ran; unsafe ones (a timeout, a download moved behind a
barrier, a removed world size) only with `unsafe=True`.
"""
from __future__ import annotations

import ast
import difflib
import io
import os
import stat
import tempfile
import tokenize
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from mgtutor.diagnostics.check.fix.edit_model import TooDeep
from mgtutor.diagnostics.check.fix.edits import apply_edits
from mgtutor.diagnostics.check.script_model import ScriptModel
from mgtutor.training.foundation.i18n import _
from mgtutor.diagnostics.check.project import Project
from mgtutor.diagnostics.check.rules import RULES, Rule
from mgtutor.diagnostics.check.script import (
    CheckError, CheckFinding, check_source, decode_source, parse, read_script,
)

MAX_STEPS = 80   # fixes per file; each removes a finding, so a script needs far fewer


@dataclass(frozen=True)
class AppliedFix:
    rule: str
    line: int          # in the text the fix was applied to
    message: str
    safety: str


@dataclass
class FixReport:
    file: str
    before: str
    after: str
    applied: list[AppliedFix] = field(default_factory=list)
    by_hand: list[CheckFinding] = field(default_factory=list)   # findings left in the fixed text
    written_to: str = ""        # the file written, when it is not `file` itself (`file` is a symlink)

    @property
    def changed(self) -> bool:
        return self.before != self.after

    def diff(self) -> str:
        return unified_diff(self.before, self.after, self.file)

    def to_json(self) -> dict:
        return {"file": self.file, "changed": self.changed, "diff": self.diff(),
                "applied": [vars(a) for a in self.applied],
                "by_hand": [{"rule": f.rule, "line": f.line, "fix_safety": f.fix_safety or "by hand"}
                            for f in self.by_hand]}


def unified_diff(before: str, after: str, name: str) -> str:
    lines = difflib.unified_diff(_lines(before), _lines(after), fromfile=f"a/{name.lstrip('/')}", tofile=f"b/{name.lstrip('/')}")
    return "".join(lines)


def _lines(text: str) -> list[str]:
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith(("\n", "\r")):
        lines[-1] += "\n\\ No newline at end of file\n"
    return lines


def fix_source(text: str, filename: str = "<script>", unsafe: bool = False,
               project: Project | None = None, only: set[str] | None = None) -> FixReport:
    """The script's text with every fixable finding fixed; raises CheckError when it cannot be read."""
    parse(text, filename)
    current, applied = text, []
    tried: set[tuple[str, str, str]] = set()
    rules = [r for r in RULES if r.rewrite is not None and (unsafe or r.safety == "safe")
             and (only is None or r.id in only)]
    models = Models(filename, project)
    try:
        for _ in range(MAX_STEPS):
            step = _next_fix(current, filename, rules, tried, models)
            if step is None:
                break
            current, done = step
            applied.append(done)
    except (RecursionError, TooDeep):
        raise CheckError(too_deep(filename)) from None
    # what is left: findings with no rewrite, unsafe ones not asked for, and rewrites that did not apply
    models.hand_over(current)
    left = [f for f in check_source(current, filename, project) if only is None or f.rule in only]
    return FixReport(filename, text, current, applied, left)


def too_deep(filename: str) -> str:
    return _("{file}: nested too deeply for check --fix and convert to rewrite; check still reads it").format(
        file=filename)


class Models:
    """The models of the texts a fix goes through, kept for the next step: parsing and analysing a
    big script is most of what a fix costs, and each text is read once."""

    def __init__(self, filename: str, project: Project | None) -> None:
        self.filename, self.project = filename, project
        self.by_text: dict[str, ScriptModel] = {}

    def of(self, text: str) -> ScriptModel:
        if text not in self.by_text:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model = ScriptModel(ast.parse(text, filename=self.filename), text, self.filename)
            if self.project is not None:
                self.project.attach(model, Path(self.filename))
            self.by_text = {text: model}  # only the latest: the older texts are done with
        return self.by_text[text]

    def hand_over(self, text: str) -> None:
        """The final text's model goes to the project, where check_source finds it."""
        if self.project is not None and text in self.by_text:
            self.project.remember(self.by_text[text], Path(self.filename))


def _hits(rule: Rule, model: ScriptModel) -> list[tuple[ast.AST, str]]:
    return [(node, message or rule.title) for node, message, *caveat in rule.find(model)
            if not caveat or (rule.fix_unsure is not None and rule.fix_unsure(node, model))]


def _key(rule: Rule, model: ScriptModel, node: ast.AST, message: str) -> tuple[str, str, str]:
    return rule.id, model.line(getattr(node, "lineno", 1)).strip(), message


def _next_fix(text: str, filename: str, rules: list[Rule], tried: set, models: Models
              ) -> tuple[str, AppliedFix] | None:
    model = models.of(text)
    for rule in rules:
        for node, message in _hits(rule, model):
            key = _key(rule, model, node, message)
            if key in tried:
                continue
            tried.add(key)
            try:
                edits = rule.rewrite(node, model) if rule.rewrite else None
            except (LookupError, ValueError, AttributeError, TypeError):
                edits = None
            new = apply_edits(text, edits) if edits else None
            if new is None or new == text or not _parses(new, filename):
                continue
            saved = models.by_text
            after = models.of(new)
            if key in {_key(rule, after, n, msg) for n, msg in _hits(rule, after)}:
                models.by_text = saved  # back to the text this step started from
                continue  # the finding survived its own fix: never write it
            return new, AppliedFix(rule.id, getattr(node, "lineno", 1), message, rule.safety)
    return None


def _parses(text: str, filename: str) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(text, filename, "exec", dont_inherit=True)
        return True
    except (SyntaxError, ValueError):
        return False


def fix_file(path: str | Path, unsafe: bool = False, write: bool = False, project: Project | None = None,
             only: set[str] | None = None) -> FixReport:
    """With `write`, the fixed text replaces the file (same encoding, atomically)."""
    path = Path(path)
    data = read_script(path)
    report = fix_source(decode_source(data, str(path)), str(path), unsafe, project or Project(path.parent), only)
    if write and report.changed:
        target = write_text(path, report.after, data)
        if path.is_symlink():
            report.written_to = str(target)
    return report


def write_text(path: Path, text: str, original: bytes) -> Path:
    """The fixed text replaces the script's, in its own encoding, and the file written is returned.
    Through a symlink, the file it points to is rewritten (the link stays a link to it). A file with other
    hard links is rewritten in place, so every name still sees one file. Otherwise a new file beside it is
    renamed over it, so nothing ever reads half a script. The owner and mode stay."""
    encoding, _lines = tokenize.detect_encoding(io.BytesIO(original).readline)
    bom = b"\xef\xbb\xbf" if encoding == "utf-8-sig" else b""
    data = bom + text.encode("utf-8" if bom else encoding)
    target = Path(os.path.realpath(path))
    info = os.stat(target)
    if info.st_nlink > 1:
        _rewrite_in_place(target, data)
    else:
        _replace(target, data, info)
    return target


def _new_file_beside(target: Path, data: bytes, info: os.stat_result) -> str:
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, stat.S_IMODE(info.st_mode))
        if hasattr(os, "chown") and info.st_uid != os.geteuid():
            try:
                os.chown(tmp, info.st_uid, info.st_gid)  # root fixing a user's script: it stays the user's
            except PermissionError:
                pass
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return tmp


def _replace(target: Path, data: bytes, info: os.stat_result) -> None:
    tmp = _new_file_beside(target, data, info)
    try:
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _rewrite_in_place(target: Path, data: bytes) -> None:
    """Same inode: the new text is first written whole to a file beside it (a kill during the rewrite
    leaves it there), then over the old bytes, then the spare copy goes."""
    spare = _new_file_beside(target, data, os.stat(target))
    fd = os.open(target, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.ftruncate(fd, len(data))
        os.fsync(fd)
    finally:
        os.close(fd)
    Path(spare).unlink(missing_ok=True)


DEVICE_RULES = {"cuda-required", "nccl-no-fallback", "no-set-device"}


def device_patch(path: str | Path) -> FixReport | None:
    """What `check --fix` writes for a script that asked for CUDA where there is none (a diagnosis
    shows it beside the user's line); None when the file is gone or nothing would change."""
    try:
        report = fix_file(path, only=DEVICE_RULES)
    except CheckError:
        return None
    return report if report.changed else None
