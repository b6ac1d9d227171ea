"""Check rules about speed and precision: per-step syncs, find_unused_parameters, data loading from
disk, deprecated AMP and float16 without a scaler. Same contract as match/core.py."""
from __future__ import annotations

import ast

from mgtutor.training.foundation.i18n import N_, _
from mgtutor.diagnostics.check.match.core import DATALOADER, DDP, Hits, uses_accelerate, uses_cuda
from mgtutor.diagnostics.check.match.data import dataset_source, reads_from_disk
from mgtutor.diagnostics.check.script_model import (
    ScriptModel, constant, dotted, has_star_kwargs, keyword, last_name, walk_local,
)


def deprecated_cuda_amp(m: ScriptModel) -> Hits:
    seen = set()
    for node in m.nodes:
        if isinstance(node, ast.ImportFrom):
            hit = (node.module or "").startswith("torch.cuda.amp")
        elif isinstance(node, ast.Attribute):
            hit = (m.resolve(node) or "").startswith("torch.cuda.amp.") \
                and not isinstance(m.parent.get(node), ast.Attribute)
        else:
            continue
        if hit and node.lineno not in seen and not m.enclosing(node, (ast.ExceptHandler,)):  # an old-torch fallback
            seen.add(node.lineno)
            yield node, None


def fp16_without_scaler(m: ScriptModel) -> Hits:
    if uses_accelerate(m) or not any(last_name(c.func) == "backward" for c in m.calls) \
            or any(last_name(c.func) in ("GradScaler", "ShardedGradScaler") for c in m.calls) or _scaler_in_hand(m):
        return
    for call in m.calls:
        if last_name(call.func) == "autocast" and _autocast_is_fp16(m, call):
            yield call, None
            return
    for call in m.method_calls("half"):
        if not call.args:
            yield call, N_("the model trains in float16 (.half()) with no GradScaler: small gradients underflow "
                           "to zero")
            return


def _scaler_in_hand(m: ScriptModel) -> bool:
    """A scaler made elsewhere and handed in (`def train_one_epoch(…, loss_scaler)`, timm's NativeScaler)."""
    return any(isinstance(n, ast.arg) and "scaler" in n.arg.lower() for n in m.nodes) or \
        any("Scaler" in (last_name(c.func) or "") for c in m.calls) or _scales_by_hand(m)


def _scales_by_hand(m: ScriptModel) -> bool:
    """Loss scaling written out: `(loss * loss_scale).backward()` (guided-diffusion's, apex's own): the loss
    is multiplied by a scale before backward, which is what a GradScaler does."""
    for call in m.method_calls("backward"):
        receiver = call.func.value if isinstance(call.func, ast.Attribute) else None
        if isinstance(receiver, ast.BinOp) and isinstance(receiver.op, ast.Mult) and any(
                "scale" in (last_name(n) or "").lower() for n in ast.walk(receiver)
                if isinstance(n, (ast.Name, ast.Attribute))):
            return True
    return False


def _autocast_is_fp16(m: ScriptModel, call: ast.Call) -> bool:
    if constant(keyword(call, "enabled"), True) is False or has_star_kwargs(call):
        return False
    dtype = keyword(call, "dtype")
    if dtype is not None:
        return (dotted(dtype) or "").rsplit(".", 1)[-1] in ("float16", "half")
    device = keyword(call, "device_type") or (call.args[0] if call.args else None)
    return (m.resolve(call.func) or "").startswith("torch.cuda.amp.") or constant(device) == "cuda"


def find_unused_parameters(m: ScriptModel) -> Hits:
    for call in m.calls_to(*DDP):
        if constant(keyword(call, "find_unused_parameters")) is True:
            yield keyword(call, "find_unused_parameters"), None


def sync_every_step(m: ScriptModel) -> Hits:
    for loop in m.training_loops:
        losses = {dotted(c.func.value) for c in walk_local(loop) if isinstance(c, ast.Call)
                  and last_name(c.func) == "backward" and isinstance(c.func, ast.Attribute)} - {None}
        for node in sorted(walk_local(loop), key=lambda n: (getattr(n, "lineno", 0), getattr(n, "col_offset", 0))):
            if not isinstance(node, ast.Call) or not m.unconditional_in(node, loop):
                continue
            if last_name(node.func) == "item" and not node.args:
                yield node, None
                break
            if dotted(node.func) == "print" and any(dotted(n) in losses for n in ast.walk(node)
                                                    if isinstance(n, (ast.Name, ast.Attribute))):
                yield node, N_("print() of the loss on every step waits for the GPU (a sync per step)")
                break


def slow_dataloader(m: ScriptModel) -> Hits:
    """Only loaders whose data set is read from files: data held in memory (tensors, MNIST/CIFAR
    arrays, a tokenized table) gains nothing from worker processes."""
    if not reads_from_disk(m):
        return
    cuda = uses_cuda(m)
    for call in m.calls_to(*DATALOADER):
        if has_star_kwargs(call) or len(call.args) > 5:
            continue
        source = dataset_source(m, call.args[0] if call.args else keyword(call, "dataset"))
        if source == "memory":
            continue
        missing = []
        workers = keyword(call, "num_workers")
        if workers is None or constant(workers) == 0:
            missing.append("num_workers")
        if cuda and constant(keyword(call, "pin_memory"), False if keyword(call, "pin_memory") is None else True) is False:
            missing.append("pin_memory=True")
        if not missing:
            continue
        if source == "disk":
            yield call, _("this DataLoader reads files from disk without {missing}: the GPU waits on one process "
                          "decoding data").format(missing=_(" and ").join(missing))
        else:
            yield call, _("this DataLoader has no {missing}, and this script reads data from disk").format(
                missing=_(" and ").join(missing)), \
                N_("could not trace this loader's data set; if it is held in memory, num_workers=0 is the right choice")
