"""The rules of `mgtutor check`, as data: rules.json beside this file holds, one object a rule, what
each finds, why it matters, the fix as a small before/after snippet, and the lesson that teaches it,
under the names of Rule's fields. The evidence each looks for is a small function in match/ (core.py
holds the shared facts, each other module one family of rules), named in the JSON by its module's
name here and its own ("speed.fp16_without_scaler"); so is the rewrite `check --fix` writes
("fixes_amp.torch_amp"). FUNCTION_MODULES is the one list of the modules a name may come from.

Severities: `error` — the job trains wrong, crashes or hangs; `warning` — very likely a bug or a
deprecated API; `advice` — it works, but slower or harder to run than it needs to be.
Confidence says how the evidence is read: `high` — the call itself is the mistake (an API, an
argument); `medium` — the rule follows the code (guards, helpers in the file or project) and dynamic
code can hide what it looks for; `low` — a habit guessed from names and shapes. A finding whose rule
could not follow the code far enough (a helper it could not read) says so in its caveat, and is
advice whatever the rule's severity.
Tags name the symptom a rule explains (Troubleshoot filters by them): data, device, speed, hang,
output, precision, launch.

title, why and fix are English msgids: babel.cfg extracts them from the JSON, and the finding says
them through `_()` where it is built (script.py), as for any `N_()` table.
"""
from __future__ import annotations

import ast
import inspect
import json
from dataclasses import MISSING, dataclass, fields
from importlib import resources
from types import ModuleType
from typing import Any, Callable

from mgtutor.diagnostics.check.fix import amp as fixes_amp
from mgtutor.diagnostics.check.fix import cuda as fixes_cuda
from mgtutor.diagnostics.check.fix import epoch as fixes_epoch
from mgtutor.diagnostics.check.fix import rewrites as fixes
from mgtutor.diagnostics.check.fix import save as fixes_save
from mgtutor.diagnostics.check.match import core as match
from mgtutor.diagnostics.check.match import cuda, data, identity, lifecycle, paths, ranks, speed
from mgtutor.diagnostics.check.script_model import ScriptModel

SEVERITIES = ("error", "warning", "advice")
CONFIDENCES = ("high", "medium", "low")
SAFETIES = ("safe", "unsafe")
TAGS = ("data", "device", "speed", "hang", "output", "precision", "launch")


@dataclass(frozen=True)
class Rule:
    id: str
    severity: str
    title: str                 # what was found, one line
    why: str                   # why it matters
    fix: str                   # what to do, one line
    before: str                # the fix as code: before …
    after: str                 # … and after
    lesson: str
    tags: tuple[str, ...]
    find: Callable[[ScriptModel], match.Hits]
    confidence: str = "medium"
    # (before, after) written from the user's own code at the finding, instead of the generic pair
    fix_for: Callable[[ast.AST, ScriptModel], tuple[str, str] | None] | None = None
    # the edits `check --fix` writes for a finding (fix/rewrites.py); "safe" keeps what the script does on
    # the machines it already ran on, "unsafe" may change it (applied only with --unsafe-fixes)
    rewrite: Callable[[ast.AST, ScriptModel], fixes.Edits] | None = None
    safety: str = "safe"
    # a finding that may not apply is still fixed where this says the fix is harmless either way
    fix_unsure: Callable[[ast.AST, ScriptModel], bool] | None = None


# The modules whose functions rules.json may name, by the name it uses ("speed.fp16_without_scaler").
FUNCTION_MODULES: dict[str, ModuleType] = {
    "match": match, "cuda": cuda, "data": data, "identity": identity, "lifecycle": lifecycle, "paths": paths,
    "ranks": ranks, "speed": speed, "fixes": fixes, "fixes_amp": fixes_amp, "fixes_cuda": fixes_cuda,
    "fixes_epoch": fixes_epoch, "fixes_save": fixes_save,
}
FUNCTION_FIELDS = ("find", "fix_for", "rewrite", "fix_unsure")
CHOICES = {"severity": SEVERITIES, "confidence": CONFIDENCES, "safety": SAFETIES}


class RuleDataError(ValueError):
    """rules.json says something Rule cannot be made from (a missing or unknown key, an unknown function)."""


def function_named(name: str) -> Callable[..., Any]:
    """The function "module.function" names: one defined in that module of FUNCTION_MODULES."""
    module_name, _, function_name = name.partition(".")
    module = FUNCTION_MODULES.get(module_name)
    function = getattr(module, function_name, None) if module and not function_name.startswith("_") else None
    if module is None or not inspect.isfunction(function) or function.__module__ != module.__name__:
        raise RuleDataError(f"{name!r} is no function defined in one of the modules {', '.join(FUNCTION_MODULES)}")
    return function


def rule_from(row: dict[str, Any]) -> Rule:
    """One object of rules.json as a Rule; RuleDataError says what is wrong with it."""
    if not isinstance(row, dict):
        raise RuleDataError(f"rules.json: a rule is an object, not {row!r}")
    where = f"rules.json, rule {row.get('id', '?')!r}"
    unknown = row.keys() - {f.name for f in fields(Rule)}
    missing = {f.name for f in fields(Rule) if f.default is MISSING} - row.keys()
    if unknown or missing:
        raise RuleDataError(f"{where}: unknown keys {sorted(unknown)}, missing keys {sorted(missing)}")
    for key, value in row.items():
        if key != "tags" and not (isinstance(value, str) and value):
            raise RuleDataError(f"{where}: {key} is not a text")
    for key, choices in CHOICES.items():
        if key in row and row[key] not in choices:
            raise RuleDataError(f"{where}: {key} {row[key]!r} is not one of {choices}")
    tags = row["tags"]
    if not isinstance(tags, list) or not tags or not set(tags) <= set(TAGS):
        raise RuleDataError(f"{where}: tags {tags!r} are not a list of {TAGS}")
    try:
        functions = {key: function_named(row[key]) for key in FUNCTION_FIELDS if key in row}
    except RuleDataError as exc:
        raise RuleDataError(f"{where}: {exc}") from None
    return Rule(**{**row, "tags": tuple(tags), **functions})


def rules_from(text: str) -> tuple[Rule, ...]:
    rules = tuple(rule_from(row) for row in json.loads(text)["rules"])
    ids = [rule.id for rule in rules]
    if len(set(ids)) != len(ids):
        raise RuleDataError(f"rules.json: an id twice: {sorted({i for i in ids if ids.count(i) > 1})}")
    return rules


RULES: tuple[Rule, ...] = rules_from(
    resources.files("mgtutor.diagnostics.check").joinpath("rules.json").read_text("utf-8"))

RULES_BY_ID = {rule.id: rule for rule in RULES}

# Troubleshoot's symptoms and the tags of the rules that can explain them.
SYMPTOM_TAGS: dict[str, tuple[str, ...]] = {
    "one-gpu-busy": ("device",),
    "same-data": ("data",),
    "no-speedup": ("speed", "data"),
    "hang": ("hang",),
}
