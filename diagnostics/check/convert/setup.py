"""Where `mgtutor convert` joins the process group, and how the converted script leaves it.

The group must exist before anything that asks for it runs (a DistributedSampler, a DDP wrap), on
every path (never only in the GPU branch of `if use_accel:`), and it is torn down only when it was
made, so an early error (argparse's usage, a missing file) is the error the user sees.

  - the script's device variable takes `ddp_setup(<its old value>)`: set once, right where it is
    set, or right after the `if` that chooses it (the value it chose decides GPU or CPU);
  - a DataLoader or DDP wrap that runs at import time, before that point, gets a `ddp_setup()` of
    its own just before it (ddp_setup joins the group once; a second call returns the same device);
  - a script with a `__main__` block runs it under try: … barrier, `finally:` destroy if initialised;
    a flat script ends with the same barrier and destroy.
"""
from __future__ import annotations

import ast

from mgtutor.diagnostics.check.fix.edit_model import Edit, where
from mgtutor.diagnostics.check.fix.rewrites import text
from mgtutor.diagnostics.check.match.core import DDP
from mgtutor.diagnostics.check.script_model import DEF_NODES, LOOP_NODES, ScriptModel, identifier_parts, last_name

DEVICE_WORDS = {"device", "dev", "gpu"}
NOT_A_DEVICE = {"num", "n", "nb", "use", "no", "count", "ids", "list", "type", "name"}
NOT_A_VALUE = (ast.List, ast.Tuple, ast.Set, ast.Dict, ast.Compare, ast.BoolOp, ast.Lambda, ast.JoinedStr)


def main_block(m: ScriptModel) -> ast.If | None:
    for node in m.tree.body:
        if isinstance(node, ast.If) and "__main__" in ast.dump(node.test):
            return node
    return None


def setup_anchor(m: ScriptModel) -> ast.stmt:
    """Where the `ddp_setup` function goes: before the script's first statement that runs code (a def, a
    block, a call), after its docstring, imports and plain constants, so a flat script can call it from
    its first lines."""
    for index, node in enumerate(m.tree.body):
        docstring = index == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
        constants = isinstance(node, (ast.Assign, ast.AnnAssign)) and not any(
            isinstance(n, (ast.Call, ast.Name, ast.Attribute, ast.Lambda)) for n in ast.walk(node.value or node)
            if n not in getattr(node, "targets", [getattr(node, "target", None)]))
        if not docstring and not constants and not isinstance(node, (ast.Import, ast.ImportFrom)):
            return node
    raise LookupError("no statement to place ddp_setup before")


def _scopes(m: ScriptModel) -> list[ast.AST]:
    """Where a device is chosen, in the order they are looked at: the __main__ block, main(), the module."""
    block = main_block(m)
    return [*([block] if block is not None else []), *m.functions.get("main", []), m.tree]


def _used_as_device(m: ScriptModel) -> set[str]:
    used = set()
    for call in m.calls:
        if last_name(call.func) in ("to", "cuda", "device") and call.args:
            used.add(text(m, call.args[0]))
        used |= {text(m, kw.value) for kw in call.keywords if kw.arg in ("device", "map_location")}
    return used


def _is_device_assignment(m: ScriptModel, node: ast.AST, used: set[str]) -> bool:
    if not (isinstance(node, ast.Assign) and len(node.targets) == 1
            and isinstance(node.targets[0], (ast.Name, ast.Attribute))) or isinstance(node.value, NOT_A_VALUE):
        return False
    value = node.value
    if isinstance(value, ast.Constant) and (isinstance(value.value, bool) or not isinstance(value.value, (int, str))):
        return False
    parts = identifier_parts(last_name(node.targets[0]))
    named = bool(parts) and parts[-1] in DEVICE_WORDS and not set(parts) & NOT_A_DEVICE
    return named or text(m, node.targets[0]) in used and not set(parts) & NOT_A_DEVICE


def device_assignment(m: ScriptModel) -> tuple[ast.Assign, ast.AST] | None:
    """The script's one device variable (`device = …`, `args.device = …`) and the scope it is set in;
    not one set inside a loop (a tensor moved each step)."""
    used, block = _used_as_device(m), main_block(m)
    for scope in _scopes(m):
        body = scope.body if isinstance(scope, (ast.Module, ast.If, ast.FunctionDef, ast.AsyncFunctionDef)) else []
        for stmt in body:
            if isinstance(stmt, DEF_NODES) or stmt is block:
                continue
            for node in [stmt, *ast.walk(stmt)]:
                if _is_device_assignment(m, node, used) and not _in_loop(m, node, stmt):
                    return node, scope  # type: ignore[return-value]
    return None


def _in_loop(m: ScriptModel, node: ast.AST, top: ast.stmt) -> bool:
    current: ast.AST | None = node
    while current is not None and current is not top:
        if isinstance(current, LOOP_NODES):
            return True
        current = m.parent.get(current)
    return isinstance(top, LOOP_NODES)


def top_statement(m: ScriptModel, node: ast.AST, scope: ast.AST) -> ast.stmt:
    """The statement of `scope`'s own body that holds `node`."""
    current = node
    while m.parent.get(current) is not None and m.parent[current] is not scope:
        current = m.parent[current]
    return current  # type: ignore[return-value]


def _assigned_on_every_branch(m: ScriptModel, stmt: ast.stmt, target: str) -> bool:
    if not isinstance(stmt, ast.If) or not stmt.orelse:
        return False
    def sets(block: list[ast.stmt]) -> bool:
        return any(isinstance(n, ast.Assign) and any(text(m, t) == target for t in n.targets)
                   for s in block for n in ast.walk(s))
    return sets(stmt.body) and (sets(stmt.orelse) if not (len(stmt.orelse) == 1 and isinstance(stmt.orelse[0], ast.If))
                                else _assigned_on_every_branch(m, stmt.orelse[0], target))


def _cuda_if_available(value: ast.AST) -> bool:
    """`torch.device("cuda:0" if torch.cuda.is_available() else "cpu")`: what ddp_setup() chooses anyway
    (with this rank's GPU, not GPU 0), so the call needs no argument."""
    names = {n.id for n in ast.walk(value) if isinstance(n, ast.Name)}
    return names <= {"torch"} and any(isinstance(n, ast.Attribute) and n.attr == "is_available" for n in ast.walk(value))


def device_edits(m: ScriptModel) -> tuple[list[Edit], ast.AST | None, int | None]:
    """The edits that make the device this rank's, the scope they run in and the line; ([], None, None)
    when the script has no device variable."""
    found = device_assignment(m)
    if found is None:
        return [], None, None
    node, scope = found
    target = text(m, node.targets[0])
    top = top_statement(m, node, scope)
    if top is node:
        wish = "" if _cuda_if_available(node.value) else text(m, node.value)
        return [Edit("replace", where(node.value, m.lines), f"ddp_setup({wish})")], scope, node.lineno
    chosen = target if _assigned_on_every_branch(m, top, target) else ""
    return [Edit("after", where(top, m.lines), f"{target} = ddp_setup({chosen})")], scope, node.lineno


def early_users(m: ScriptModel, setup_scope: ast.AST | None, setup_line: int | None,
                samplers: list[ast.AST]) -> ast.stmt | None:
    """The first module-level statement that needs the group (a loader given a sampler, a DDP wrap)
    and runs before the setup does; None when the setup comes first."""
    needs = [c for c in samplers] + list(m.calls_to(*DDP))
    tops = sorted({top_statement(m, c, m.tree) for c in needs if m.enclosing(c, DEF_NODES) is None},
                  key=lambda s: s.lineno)
    tops = [s for s in tops if s is not main_block(m)]
    if not tops:
        return None
    if setup_scope is m.tree and setup_line is not None and setup_line < tops[0].lineno:
        return None
    return tops[0]


def ending_edits(m: ScriptModel, dist: str) -> list[Edit]:
    """Every rank leaves together; the group is destroyed only if it was made (so the script's own
    error, raised before ddp_setup ran, is the one shown)."""
    cleanup = f"if {dist}.is_initialized():\n    {dist}.destroy_process_group()"
    block = main_block(m)
    if block is not None:
        return [Edit("try_finally", where(block, m.lines), cleanup, f"{dist}.barrier()")]
    last = m.tree.body[-1]
    return [Edit("after", where(last, m.lines),
                 f"if {dist}.is_initialized():\n    {dist}.barrier()\n    {dist}.destroy_process_group()")]
