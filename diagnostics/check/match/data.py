"""Check rules about data and checkpoints coming in: where a DataLoader's data set comes from (disk
or memory), data sets downloaded by every rank at once, and `torch.load` without `map_location`.
Same contract as match/core.py: yield (node, message-or-None[, caveat]), nothing when unsure."""
from __future__ import annotations

import ast
from pathlib import Path

from mgtutor.diagnostics.check import call_facts
from mgtutor.training.foundation.i18n import N_, _
from mgtutor.diagnostics.check.match.core import Hits, distributed, in_single_process_branch, manual_ddp, uses_cuda
from mgtutor.diagnostics.check.script_model import (
    DEF_NODES, ScriptModel, constant, has_star_kwargs, keyword, last_name, walk_local,
)

DISK_READS = {"open", "imread", "read_image", "decode_image", "load", "read_csv", "read_parquet", "loadtxt",
              "read_file", "fromfile", "memmap"}
# torchvision data sets that hold every sample in memory once built (arrays or tensors, not files)
IN_MEMORY_TORCHVISION = {"MNIST", "FashionMNIST", "KMNIST", "EMNIST", "QMNIST", "CIFAR10", "CIFAR100", "SVHN",
                         "USPS", "FakeData", "STL10", "SEMEION"}
IN_MEMORY_CALLS = {"TensorDataset", "StackDataset"}
PASS_THROUGH = {"random_split", "Subset", "ConcatDataset", "shuffle", "select", "train_test_split", "rename_column",
                "rename_columns", "remove_columns", "set_format", "with_format", "filter", "shard", "cast_column"}
FIRST_CONTEXTS = ("first",)   # main_process_first(), rank_zero_first(), local_main_process_first(), zero_first()


# -- where a data set comes from ---------------------------------------------------------------
def dataset_source(m: ScriptModel, node: ast.AST | None, depth: int = 0) -> str | None:
    """'disk' (files read per sample), 'memory' (tensors, arrays, pre-tokenized tables) or None."""
    if depth > 6 or node is None:
        return None
    if isinstance(node, ast.Subscript):
        return dataset_source(m, node.value, depth + 1)
    if isinstance(node, ast.Name):
        return dataset_source(m, call_facts.assigned_before(m, node), depth + 1)
    if isinstance(node, (ast.List, ast.Tuple, ast.ListComp)):
        return "memory"
    if not isinstance(node, ast.Call):
        return None
    full, name = m.resolve(node.func) or "", last_name(node.func) or ""
    if name in IN_MEMORY_CALLS:
        return "memory"
    if full.startswith("torchvision.datasets.") or name in ("ImageFolder", "DatasetFolder"):
        return "memory" if name in IN_MEMORY_TORCHVISION else "disk"
    if name == "map" and isinstance(node.func, ast.Attribute):
        return "memory"       # a Hugging Face data set mapped once (tokenized) is read from Arrow, not decoded
    if name in ("with_transform", "set_transform"):
        return "disk"         # decoded on every access
    if name in PASS_THROUGH:
        inner = node.func.value if isinstance(node.func, ast.Attribute) and name not in ("random_split", "Subset") \
            else (node.args[0] if node.args else None)
        return dataset_source(m, inner, depth + 1)
    return _class_source(m, node)


def _class_source(m: ScriptModel, call: ast.Call) -> str | None:
    """A Dataset class of this file: 'disk' when its __getitem__ reads files, else 'memory'."""
    for cls in m.classes.get(last_name(call.func) or "", []):
        getitem = [f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == "__getitem__"]
        if getitem:
            reads = any(isinstance(c, ast.Call) and last_name(c.func) in DISK_READS for c in ast.walk(getitem[0]))
            return "disk" if reads else "memory"
    return None


def reads_from_disk(m: ScriptModel) -> bool:
    """Some data set in this script is read from files (the script-wide evidence)."""
    return any(dataset_source(m, call) == "disk" for call in m.calls) or any(
        isinstance(c, ast.Call) and last_name(c.func) in DISK_READS
        for fn in m.functions.get("__getitem__", []) for c in walk_local(fn))


# -- download=True on every rank -------------------------------------------------------------------
def download_every_rank(m: ScriptModel) -> Hits:
    """download=True on every rank, here or in a helper every rank calls (a project's build_dataset)."""
    if not (distributed(m) or _fabric_on_several_devices(m)):
        return
    helpers_seen = set()
    for call in m.calls:
        if m.runs_on_all_ranks(call) is not True or call_facts.in_spawn_parent(m, call) or _in_first_context(m, call) \
                or _after_barrier(m, call) or in_single_process_branch(m, call):
            continue
        if constant(keyword(call, "download")) is True:
            yield call, None
            continue
        found = call_facts.find_in_helper(m, call, _downloads_unguarded, ast.Call)
        if found and found[0] is not m and id(found[1]) not in helpers_seen:  # this file's own: found directly
            helpers_seen.add(id(found[1]))
            model, node = found
            yield call, _("{call} downloads a data set with download=True ({file}, line {line}), and every rank "
                          "calls it").format(call=call_facts.describe_call(m, call), file=Path(model.filename).name,
                                             line=node.lineno)


def _downloads_unguarded(model: ScriptModel, node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and constant(keyword(node, "download")) is True and \
        model.rank_guard(node) is None and not _in_first_context(model, node) and not _after_barrier(model, node)


def _fabric_on_several_devices(m: ScriptModel) -> bool:
    """Lightning Fabric runs the script once per device, unless it is told devices=1."""
    return any(last_name(c.func) == "Fabric" and constant(keyword(c, "devices")) != 1
               for c in m.calls if (m.resolve(c.func) or "").startswith(("lightning", "L.")))


def _in_first_context(m: ScriptModel, node: ast.AST) -> bool:
    current = m.parent.get(node)
    while current is not None and not isinstance(current, DEF_NODES):
        if isinstance(current, (ast.With, ast.AsyncWith)) and any(
                isinstance(i.context_expr, ast.Call) and (last_name(i.context_expr.func) or "").endswith(FIRST_CONTEXTS)
                for i in current.items):
            return True
        current = m.parent.get(current)
    return False


def _after_barrier(m: ScriptModel, node: ast.expr) -> bool:
    """A barrier earlier in the same function: the first-process-downloads pattern."""
    def first_barriers() -> dict[int, int]:
        lines: dict[int, int] = {}  # id of a scope (None: the module) -> the line of its first barrier
        for call in m.calls:
            if last_name(call.func) in ("barrier", "monitored_barrier", "wait_for_everyone"):
                key = id(m.enclosing(call, DEF_NODES))
                lines[key] = min(lines.get(key, call.lineno), call.lineno)
        return lines
    first = m.remember("first_barriers", first_barriers).get(id(m.enclosing(node, DEF_NODES)))
    return first is not None and first < node.lineno


# -- torch.load without map_location ---------------------------------------------------------------
def load_without_map_location(m: ScriptModel) -> Hits:
    if not (manual_ddp(m) or call_facts.spawn_targets(m)):
        return
    loads = m.calls_to("torch.load", bare=False)
    for call in loads:
        if _has_map_location(call) or has_star_kwargs(call) or call_facts.in_spawn_parent(m, call) \
                or in_single_process_branch(m, call):
            continue
        if m.runs_on_all_ranks(call) is False or _sibling_chooses_location(m, call, loads) \
                or call_facts.per_rank_path(m, call.args[:1] + [k.value for k in call.keywords if k.arg == "f"]):
            continue
        if not (_on_gpus(m) and _saves_device_tensors(m)):
            yield call, None, N_("whether it matters depends on where the checkpoint's tensors were saved from: "
                                 "tensors saved from the CPU load on the CPU, and this file does not save it")
        elif m.runs_on_all_ranks(call) is None:
            yield call, None, N_("could not tell whether every rank runs this load (it sits in code this file "
                                 "never calls)")
        else:
            yield call, None


def straight_into_load_state_dict(node: ast.AST, m: ScriptModel) -> bool:
    """`model.load_state_dict(torch.load(path))`, or `torch.load(path)["model"]` handed to it: the loaded
    tensors are only copied into the model's parameters, wherever those live: map_location="cpu" is then
    safe even where the finding may not apply (`check --fix` writes it)."""
    parent = m.parent.get(node)
    while isinstance(parent, ast.Subscript) and parent.value is node:
        node, parent = parent, m.parent.get(parent)
    return isinstance(parent, ast.Call) and last_name(parent.func) == "load_state_dict" and node in parent.args


def _on_gpus(m: ScriptModel) -> bool:
    return uses_cuda(m) or bool(m.method_calls("set_device")) or any(s.text == "nccl" for s in m.strings())


def _has_map_location(call: ast.Call) -> bool:
    return keyword(call, "map_location") is not None or len(call.args) >= 2


def _sibling_chooses_location(m: ScriptModel, call: ast.Call, loads: list[ast.Call]) -> bool:
    """`if gpu is None: torch.load(p) else: torch.load(p, map_location=loc)` — the function picks the
    location on purpose, and the bare load is its no-GPU-given case."""
    scope = m.enclosing(call, DEF_NODES)
    return any(other is not call and _has_map_location(other) and m.enclosing(other, DEF_NODES) is scope
               for other in loads)


def _saves_device_tensors(m: ScriptModel) -> bool:
    """This file saves a checkpoint without moving it to the CPU first: the one it loads back holds
    tensors of the GPU they were saved from."""
    for call in m.calls_to("torch.save", bare=False):
        saved = call.args[0] if call.args else keyword(call, "obj")
        if saved is not None and not any(isinstance(n, ast.Call) and last_name(n.func) == "cpu"
                                         for n in ast.walk(saved)):
            return True
    return False
