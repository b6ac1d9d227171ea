"""The rewrite for `deprecated-cuda-amp`: `torch.cuda.amp.X` becomes `torch.amp.X` with the device
given, which is what the deprecated names did implicitly ("cuda"), so behaviour is unchanged."""
from __future__ import annotations

import ast

from mgtutor.diagnostics.check.fix.edit_model import Edit, where
from mgtutor.diagnostics.check.fix.rewrites import Edits, module_name, text
from mgtutor.diagnostics.check.script_model import ScriptModel

# the new spelling of each name, and how the device is given to it
NEW_NAMES = {"autocast": ("autocast", '"cuda"'), "GradScaler": ("amp.GradScaler", '"cuda"'),
             "custom_fwd": ("amp.custom_fwd", 'device_type="cuda"'),
             "custom_bwd": ("amp.custom_bwd", 'device_type="cuda"')}


def torch_amp(node: ast.AST, m: ScriptModel) -> Edits:
    if isinstance(node, ast.ImportFrom):
        return _rewrite_import(node, m)
    if not isinstance(node, ast.Attribute) or node.attr not in NEW_NAMES:
        return None
    edits: list[Edit] = []
    try:
        torch = module_name(m, "torch", edits)
    except LookupError:
        return None
    new, device = NEW_NAMES[node.attr]
    parent = m.parent.get(node)
    if isinstance(parent, ast.Call) and parent.func is node:
        return [*edits, Edit("replace", where(parent, m.lines), f"{torch}.{new}({_args(m, parent, device)})")]
    if node.attr.startswith("custom_"):  # a bare decorator: the new one must be told the device
        return [*edits, Edit("replace", where(node, m.lines), f"{torch}.{new}({device})")]
    return None


def _args(m: ScriptModel, call: ast.Call, device: str) -> str:
    parts = [device] + [text(m, a) for a in call.args]
    parts += [f"{k.arg}={text(m, k.value)}" if k.arg else f"**{text(m, k.value)}" for k in call.keywords]
    return ", ".join(parts)


def _rewrite_import(node: ast.ImportFrom, m: ScriptModel) -> Edits:
    """`from torch.cuda.amp import autocast, GradScaler` -> `from torch.amp import …`, and each call of
    a name that now needs the device gets it."""
    if node.module != "torch.cuda.amp" or any(a.name not in NEW_NAMES for a in node.names):
        return None
    names = ", ".join(a.name + (f" as {a.asname}" if a.asname else "") for a in node.names)
    edits = [Edit("statement", where(node, m.lines), f"from torch.amp import {names}")]
    for alias in node.names:
        if alias.name == "GradScaler":
            continue  # torch.amp.GradScaler's device defaults to "cuda"
        bound, device = alias.asname or alias.name, NEW_NAMES[alias.name][1]
        for use in m.nodes:
            if not (isinstance(use, ast.Name) and use.id == bound and isinstance(use.ctx, ast.Load)):
                continue
            parent = m.parent.get(use)
            if isinstance(parent, ast.Call) and parent.func is use:
                edits.append(Edit("replace", where(parent, m.lines), f"{bound}({_args(m, parent, device)})"))
            elif alias.name.startswith("custom_"):
                edits.append(Edit("replace", where(use, m.lines), f"{bound}({device})"))
    return edits
