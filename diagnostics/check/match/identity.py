"""Check rules about who each process is and which GPU it takes (issue 44, "rank and device identity"):

- `rank-as-device`: the global rank (RANK, `dist.get_rank()`) used as a GPU index. Right on one node,
  an invalid device ordinal on the second (rank 8 of a node with 8 GPUs).
- `no-local-rank`: a DDP model put on "the" GPU with `.cuda()` and wrapped without `device_ids`, on a
  path that never reads LOCAL_RANK: every rank of a node lands on GPU 0.
- `device-count-world-size`: `torch.cuda.device_count()` used as the world size (batch split, loss
  average, `world_size=`) in a script a launcher starts: wrong as soon as there is a second node.
- `hardcoded-gpu-list`: CUDA_VISIBLE_DEVICES set by the script to a fixed list (or a fixed GPUs-per-node
  count), or `gpus = [0, 1, 2, 3]`: the GPUs the scheduler gave the job are overridden.
- `fixed-master-addr`: MASTER_ADDR set in code to a fixed address in a script meant for several nodes
  (or to a non-loopback address in any script).

Same contract as match/core.py: yield (node, message-or-None[, caveat]), nothing when unsure.
"""
from __future__ import annotations

import ast

from mgtutor.diagnostics.check import call_facts
from mgtutor.diagnostics.check.match.core import DDP, INIT, Hits, distributed, manual_ddp, no_set_device
from mgtutor.diagnostics.check.script_model import (
    DEF_NODES, ScriptModel, constant, identifier_parts, keyword, last_name,
)
from mgtutor.training.foundation.i18n import _

GLOBAL_RANK_VARS = {"RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK"}
LOCAL_VARS = {"LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID"}
LOOPBACK = {"localhost", "127.0.0.1", "::1", "0.0.0.0"}


def _names_assigned(m: ScriptModel, is_source) -> set[str]:
    """Last names (`rank`, `args.rank` -> `rank`) assigned from an expression `is_source` accepts, and
    the parameters of this file's functions that callers pass such a name to (a spawn target's first
    parameter excepted: that one is the spawn index)."""
    names: set[str] = set()
    spawned = {id(fn) for fn in call_facts.spawn_targets(m)}
    for _ in range(4):
        before = len(names)
        for node in m.nodes:
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None and is_source(node.value, names):
                for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                    if isinstance(target, (ast.Name, ast.Attribute)):
                        names.add(last_name(target))
        for call in m.calls:
            for fn in m.functions.get(last_name(call.func) or "", []):
                params = [a.arg for a in fn.args.posonlyargs + fn.args.args]
                if params and params[0] in ("self", "cls") and isinstance(call.func, ast.Attribute):
                    params = params[1:]
                for index, (param, arg) in enumerate(zip(params, call.args)):
                    if not (index == 0 and id(fn) in spawned) and not isinstance(arg, ast.Starred) \
                            and is_source(arg, names):
                        names.add(param)
        if len(names) == before:
            break
    return names


def _env_var(node: ast.AST) -> str | None:
    """`os.environ["RANK"]`, `env["RANK"]`, `os.environ.get("RANK")`, `os.getenv("RANK", 0)`."""
    if isinstance(node, ast.Subscript):
        return constant(node.slice) if isinstance(constant(node.slice), str) else None
    if isinstance(node, ast.Call) and last_name(node.func) in ("get", "getenv") and node.args:
        value = constant(node.args[0])
        return value if isinstance(value, str) else None
    return None


def _unwrap_int(node: ast.AST) -> ast.AST:
    while isinstance(node, ast.Call) and last_name(node.func) in ("int", "str") and len(node.args) == 1:
        node = node.args[0]
    return node


def global_rank_names(m: ScriptModel) -> set[str]:
    def source(value: ast.AST, names: set[str]) -> bool:
        value = _unwrap_int(value)
        if _env_var(value) in GLOBAL_RANK_VARS:
            return True
        if isinstance(value, ast.Call) and last_name(value.func) in ("get_rank", "get_global_rank") and not value.args:
            return True
        return isinstance(value, ast.Name) and value.id in names
    def compute() -> set[str]:
        names = _names_assigned(m, source)
        # a name also assigned from a local rank (`rank = local_rank` on one path) is not only global
        local = {last_name(t) for n in m.nodes if isinstance(n, ast.Assign)
                 for t in n.targets if isinstance(t, (ast.Name, ast.Attribute)) and not source(n.value, names)}
        return {n for n in names if n not in local and "local" not in identifier_parts(n)}
    return m.remember("global_rank_names", compute)


def _device_uses(m: ScriptModel) -> list[tuple[ast.AST, ast.AST, str]]:
    """(the use, the expression that names the GPU, how it is spelled) for each place a GPU index goes."""
    uses: list[tuple[ast.AST, ast.AST, str]] = []
    ddp = {id(c) for c in m.calls_to(*DDP)}
    for call in m.calls:
        name = last_name(call.func)
        full = m.resolve(call.func) or ""
        if name in ("set_device", "set_device_index") and call.args:
            uses.append((call, call.args[0], f"{name}()"))
        elif name in ("to", "cuda") and isinstance(call.func, ast.Attribute) and call.args:
            uses.append((call, call.args[0], f".{name}()"))
        elif full == "torch.device" and len(call.args) == 2:
            uses.append((call, call.args[1], "torch.device()"))
        if id(call) in ddp:
            for kw in ("device_ids", "output_device"):
                value = keyword(call, kw)
                if isinstance(value, (ast.List, ast.Tuple)) and len(value.elts) == 1:
                    uses.append((value, value.elts[0], f"{kw}="))
                elif value is not None and kw == "output_device":
                    uses.append((value, value, f"{kw}="))
    for node in m.nodes:
        if isinstance(node, ast.JoinedStr) and len(node.values) == 2 and constant(node.values[0]) == "cuda:" \
                and isinstance(node.values[1], ast.FormattedValue):
            uses.append((node, node.values[1].value, 'f"cuda:{…}"'))
    return uses


# -- rank-as-device -------------------------------------------------------------------------------
def rank_as_device(m: ScriptModel) -> Hits:
    """Not in a script that starts its processes on one machine (mp.spawn, no node count): there the rank
    is the spawn index, and the spawn index is the GPU."""
    if not distributed(m) or call_facts.spawn_targets(m) and not _multi_node(m):
        return
    names = global_rank_names(m)
    for use, index, label in _device_uses(m):
        index = _unwrap_int(index)
        direct = isinstance(index, ast.Call) and last_name(index.func) == "get_rank" and not index.args
        if direct or isinstance(index, (ast.Name, ast.Attribute)) and last_name(index) in names:
            yield use, _("{label} gets the global rank ({name}) as its GPU index: on the second node rank 8 asks "
                         "for GPU 8 of a machine that has 0-7 (invalid device ordinal)").format(
                             label=label, name=ast.unparse(index))


# -- no-local-rank --------------------------------------------------------------------------------
def _reads_local_env(_model: ScriptModel, node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value in LOCAL_VARS


def _reads_local_rank(m: ScriptModel) -> bool:
    """This file, or a helper it calls (here or in a project module), reads LOCAL_RANK."""
    return any(s.text in LOCAL_VARS for s in m.strings()) or \
        m.remember("helper_reads_local_rank", lambda: call_facts.calls_reaching(m, _reads_local_env))


def _dominating_set_device(m: ScriptModel, node: ast.AST) -> bool:
    """A set_device call that runs before `node` on every path to it (an earlier statement of the same
    block or of an enclosing block, not inside a branch of its own)."""
    child, parent = node, m.parent.get(node)
    while parent is not None and not isinstance(parent, DEF_NODES):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(parent, field, None)
            if isinstance(block, list) and child in block:
                for stmt in block[:block.index(child)]:
                    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and \
                            last_name(stmt.value.func) in ("set_device", "set_device_index"):
                        return True
        child, parent = parent, m.parent.get(parent)
    if isinstance(parent, DEF_NODES):
        for stmt in getattr(parent, "body", []):
            if stmt is child:
                break
            if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and \
                    last_name(stmt.value.func) in ("set_device", "set_device_index"):
                return True
    return False


def no_local_rank(m: ScriptModel) -> Hits:
    if not manual_ddp(m) or _reads_local_rank(m) or call_facts.unread_setup_calls(m) or \
            any(s.text == "CUDA_VISIBLE_DEVICES" for s in m.strings()) or next(no_set_device(m), None) is not None:
        return
    for call in m.calls_to(*DDP):
        if keyword(call, "device_ids") is not None or len(call.args) != 1 or _dominating_set_device(m, call):
            continue
        model = call.args[0]
        on_gpu = [c for c in ast.walk(model) if isinstance(c, ast.Call) and last_name(c.func) == "cuda" and not c.args]
        if not on_gpu and isinstance(model, (ast.Name, ast.Attribute)):
            stmt = _statement(m, call)
            block = _block_of(m, stmt)
            spelled = ast.unparse(model)
            on_gpu = [s.value for s in block[:block.index(stmt)] if isinstance(stmt, ast.stmt)
                      for s in [s] if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call)
                      and last_name(s.value.func) == "cuda" and not s.value.args
                      and isinstance(s.value.func, ast.Attribute) and ast.unparse(s.value.func.value) == spelled]
        if on_gpu:
            yield call, _("the model goes to the current GPU (.cuda()) and DDP gets no device_ids, on a path that "
                          "never reads LOCAL_RANK: under torchrun every rank of a node uses GPU 0")


def _statement(m: ScriptModel, node: ast.AST) -> ast.AST:
    current: ast.AST | None = node
    while current is not None and not isinstance(current, ast.stmt):
        current = m.parent.get(current)
    return current if current is not None else node


def _block_of(m: ScriptModel, stmt: ast.AST) -> list:
    parent = m.parent.get(stmt)
    for field in ("body", "orelse", "finalbody"):
        block = getattr(parent, field, None)
        if isinstance(block, list) and stmt in block:
            return block
    return [stmt]


# -- device-count-world-size ----------------------------------------------------------------------
def _is_device_count(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and last_name(node.func) == "device_count" and \
        (isinstance(node.func, ast.Attribute) and last_name(node.func.value) in ("cuda", "accelerator"))


def device_count_world_size(m: ScriptModel) -> Hits:
    """Not when the script starts its own processes (mp.spawn, Process): then device_count is how many
    it starts on this node, which is what it means."""
    if not distributed(m) or call_facts.spawn_targets(m) or any(last_name(c.func) in ("Process", "spawn") for c in m.calls):
        return
    if not (m.calls_to(*INIT) or any(s.text in ("RANK", "LOCAL_RANK", "WORLD_SIZE") for s in m.strings())):
        return
    names = _names_assigned(m, lambda v, n: _is_device_count(_unwrap_int(v)) or
                            isinstance(v, (ast.Name, ast.Attribute)) and last_name(v) in n)

    def counted(node: ast.AST | None) -> bool:
        node = _unwrap_int(node) if node is not None else None
        return node is not None and (_is_device_count(node) or isinstance(node, (ast.Name, ast.Attribute))
                                     and last_name(node) in names)
    uses: list[ast.AST] = []
    for node in m.nodes:
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Div, ast.FloorDiv)) and counted(node.right):
            uses.append(node)
        elif isinstance(node, ast.AugAssign) and isinstance(node.op, (ast.Div, ast.FloorDiv)) and counted(node.value):
            uses.append(node)
        elif isinstance(node, ast.keyword) and node.arg in ("world_size", "num_replicas") and counted(node.value):
            uses.append(node.value)
    if not uses:
        return
    sources = sorted((n for n in m.nodes if isinstance(n, (ast.Assign, ast.AnnAssign)) and n.value is not None
                      and _is_device_count(_unwrap_int(n.value))), key=lambda n: n.lineno)
    lines = ", ".join(str(u.lineno) for u in sorted(uses, key=lambda u: u.lineno)[:4])  # type: ignore[attr-defined]
    message = _("torch.cuda.device_count() is used as the number of processes (line {lines}): it counts this "
                "node's GPUs, so on several nodes the batch split and the averages are wrong; use "
                "dist.get_world_size()").format(lines=lines)
    yield (sources[0] if sources else uses[0]), message


# -- hardcoded-gpu-list ---------------------------------------------------------------------------
def _module_int_constants(m: ScriptModel) -> set[str]:
    return {t.id for n in m.tree.body if isinstance(n, ast.Assign) and type(constant(n.value)) is int
            for t in n.targets if isinstance(t, ast.Name)}


def _visible_devices_writes(m: ScriptModel) -> list[tuple[ast.AST, ast.AST]]:
    writes: list[tuple[ast.AST, ast.AST]] = []
    for node in m.nodes:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Subscript) \
                and constant(node.targets[0].slice) == "CUDA_VISIBLE_DEVICES":
            writes.append((node, node.value))
        elif isinstance(node, ast.Call) and last_name(node.func) in ("setdefault", "putenv") and len(node.args) == 2 \
                and constant(node.args[0]) == "CUDA_VISIBLE_DEVICES":
            writes.append((node, node.args[1]))
    return writes


def hardcoded_gpu_list(m: ScriptModel) -> Hits:
    if not distributed(m):
        return
    fixed_counts = _module_int_constants(m)
    for node, value in _visible_devices_writes(m):
        if isinstance(constant(value), str):
            yield node, _("CUDA_VISIBLE_DEVICES is set to {value!r} by the script: it overrides the GPUs the launcher "
                          "or scheduler gave this job (and every rank sees the same list)").format(value=constant(value))
            continue
        mods = [n for n in ast.walk(value) if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mod)
                and (type(constant(n.right)) is int or isinstance(n.right, ast.Name) and n.right.id in fixed_counts)]
        if mods:
            yield node, _("CUDA_VISIBLE_DEVICES is set from a fixed number of GPUs per node ({count}): on a node with "
                          "fewer GPUs a rank asks for one that is not there").format(count=ast.unparse(mods[0].right))
    for node in m.nodes:
        if isinstance(node, ast.Assign) and isinstance(node.value, (ast.List, ast.Tuple)) and len(node.value.elts) > 1 \
                and all(type(constant(e)) is int for e in node.value.elts) and any(
                    {"gpu", "gpus", "devices", "device"} & set(identifier_parts(last_name(t) or ""))
                    for t in node.targets if isinstance(t, (ast.Name, ast.Attribute))):
            yield node, _("a fixed list of GPUs ({value}) in a distributed script: each process should use the one "
                          "GPU its local rank names, whatever the machine has").format(value=ast.unparse(node.value))


# -- fixed-master-addr ----------------------------------------------------------------------------
def _multi_node(m: ScriptModel) -> bool:
    """The script computes a node's place in a job of several nodes (`args.nr`, `--nodes`, NODE_RANK)."""
    return m.remember("multi_node", lambda: _computes_node_place(m))


def _computes_node_place(m: ScriptModel) -> bool:
    if any(s.text in ("NODE_RANK", "GROUP_RANK", "SLURM_NODEID", "--nodes", "--nnodes", "--node_rank",
                      "--node-rank", "--nr") for s in m.strings()):
        return True
    for node in m.nodes:
        if isinstance(node, (ast.Name, ast.Attribute, ast.arg)):
            name = node.arg if isinstance(node, ast.arg) else last_name(node)
            parts = identifier_parts(name or "")
            if name in ("nr", "nnodes", "node_rank") or "nodes" in parts or ("node" in parts and "rank" in parts):
                return True
    return False


def fixed_master_addr(m: ScriptModel) -> Hits:
    if not distributed(m) and not m.calls_to(*INIT):
        return
    for node in m.nodes:
        value = None
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Subscript) \
                and constant(node.targets[0].slice) == "MASTER_ADDR":
            value = node.value
        elif isinstance(node, ast.Call) and last_name(node.func) == "setdefault" and len(node.args) == 2 \
                and constant(node.args[0]) == "MASTER_ADDR":
            continue  # a default the environment overrides
        address = constant(value) if value is not None else None
        if not isinstance(address, str):
            continue
        if address not in LOOPBACK:
            yield node, _("MASTER_ADDR is set to the fixed address {address!r} in the code: every run, on every "
                          "cluster, looks for rank 0 there").format(address=address)
        elif _multi_node(m):
            yield node, _("MASTER_ADDR is set to {address!r} in a script meant for several nodes: the other nodes "
                          "look for rank 0 on themselves and wait until the timeout").format(address=address)

