"""Check rules about when the process group exists (issue 44, what `convert` got wrong on real scripts):

- `init-in-device-branch`: the group is joined only inside `if use_accel:` / `if torch.cuda.is_available():`
  with nothing on the other path, so a CPU run (gloo) never joins it and fails at the first collective.
- `group-used-before-init`: a DistributedSampler (without num_replicas/rank) or a DDP wrap made at import
  time, before the statement that joins the group runs: "Default process group has not been initialized".
- `destroy-hides-error`: `destroy_process_group()` in a `finally:` or `except:` without
  `dist.is_initialized()`: when the script fails before it joined the group (argparse's usage, a missing
  file), the cleanup raises its own error instead of the script's.

Same contract as match/core.py: yield (node, message-or-None[, caveat]), nothing when unsure.
"""
from __future__ import annotations

import ast

from mgtutor.diagnostics.check import call_facts
from mgtutor.diagnostics.check.fix.edit_model import Edit, where
from mgtutor.diagnostics.check.fix.rewrites import Edits, module_name, statement_of
from mgtutor.diagnostics.check.match.core import DDP, DIST_SAMPLER, INIT, Hits
from mgtutor.diagnostics.check.script_model import DEF_NODES, ScriptModel, keyword, last_name
from mgtutor.training.foundation.i18n import _

DEVICE_WORDS = ("cuda", "gpu", "accel")


def _joins(m: ScriptModel, node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and m.resolve(node.func) in INIT


def _reaches_init(m: ScriptModel, call: ast.Call) -> bool:
    """The call joins the group: init_process_group itself, or a function that calls it (here or in a
    project module, a few calls deep)."""
    return _joins(m, call) or call_facts.call_reaches(m, call, _joins)


def _joining_calls(m: ScriptModel) -> list[ast.Call]:
    return m.remember("joining_calls", lambda: [c for c in m.calls if _reaches_init(m, c)])


def _device_test(test: ast.AST) -> bool:
    for n in ast.walk(test):
        name = (n.attr if isinstance(n, ast.Attribute) else n.id if isinstance(n, ast.Name) else "").lower()
        if any(word in name for word in DEVICE_WORDS) or isinstance(n, ast.Constant) and n.value == "cuda":
            return True
    return False


def init_in_device_branch(m: ScriptModel) -> Hits:
    joining = _joining_calls(m)
    for call in joining:
        branch, arm = _device_branch(m, call)
        if branch is None:
            continue
        other = branch.orelse if arm == "body" else branch.body
        if any(fn_call is not call and _under(m, fn_call, other) for fn_call in joining):
            continue
        if any(not _under(m, c, [branch]) and m.enclosing(c, DEF_NODES) is m.enclosing(call, DEF_NODES)
               for c in joining):
            continue  # joined elsewhere in the same function as well
        yield call, _("the process group is joined only when line {line} holds: on the other path (a CPU run "
                      "on gloo) the script never joins it and fails at its first collective").format(
                          line=branch.lineno)


def _device_branch(m: ScriptModel, node: ast.AST) -> tuple[ast.If | None, str]:
    child, parent = node, m.parent.get(node)
    while parent is not None and not isinstance(parent, DEF_NODES):
        if isinstance(parent, ast.If) and child is not parent.test and _device_test(parent.test):
            return parent, "body" if child in parent.body else "orelse"
        child, parent = parent, m.parent.get(parent)
    return None, ""


def _under(m: ScriptModel, node: ast.AST, block: list[ast.stmt]) -> bool:
    current: ast.AST | None = node
    while current is not None:
        if current in block:
            return True
        current = m.parent.get(current)
    return False


def group_used_before_init(m: ScriptModel) -> Hits:
    tops = m.tree.body
    joining = [c for c in _joining_calls(m) if m.enclosing(c, DEF_NODES) is None]  # what runs at import
    first = next((i for i, stmt in enumerate(tops) if any(_under(m, c, [stmt]) for c in joining)), None)
    if first is None:
        return
    users = [c for c in m.calls_to(*DIST_SAMPLER) if keyword(c, "num_replicas") is None and len(c.args) < 2]
    users += m.calls_to(*DDP)
    for call in sorted(users, key=lambda c: c.lineno):
        if m.enclosing(call, DEF_NODES) is not None:
            continue
        index = next(i for i, stmt in enumerate(tops) if _under(m, call, [stmt]))
        if index < first:
            yield call, _("{what} is made at line {line}, before the process group is joined (line {init}): it "
                          "raises \"Default process group has not been initialized\"").format(
                              what=last_name(call.func), line=call.lineno, init=tops[first].lineno)


def destroy_hides_error(m: ScriptModel) -> Hits:
    for call in m.calls:
        if m.resolve(call.func) != "torch.distributed.destroy_process_group" or not _in_cleanup(m, call):
            continue
        if not _checked_first(m, call):
            yield call, None


def _in_cleanup(m: ScriptModel, node: ast.AST) -> bool:
    child, parent = node, m.parent.get(node)
    while parent is not None and not isinstance(parent, DEF_NODES):
        if isinstance(parent, ast.Try) and child in parent.finalbody or isinstance(parent, ast.ExceptHandler):
            return True
        child, parent = parent, m.parent.get(parent)
    return False


def _checked_first(m: ScriptModel, node: ast.AST) -> bool:
    current = m.parent.get(node)
    while current is not None and not isinstance(current, DEF_NODES):
        if isinstance(current, (ast.If, ast.IfExp)) and any(
                isinstance(n, ast.Attribute) and n.attr in ("is_initialized", "is_available")
                or isinstance(n, ast.Name) and "init" in n.id.lower() for n in ast.walk(current.test)):
            return True
        current = m.parent.get(current)
    return False


def destroy_if_initialized(node: ast.AST, m: ScriptModel) -> Edits:
    stmt = statement_of(m, node)
    if not (isinstance(stmt, ast.Expr) and stmt.value is node):
        return None
    edits: list[Edit] = []
    try:
        dist = module_name(m, "torch.distributed", edits)
    except LookupError:
        return None
    return [*edits, Edit("wrap", where(stmt, m.lines), f"{dist}.is_initialized()")]
