"""A CUDA OOM explained with numbers: what PyTorch's message says about the GPU, how much must be
freed, which ranks share the GPU, and — after `mgtutor run --memory` — what filled the memory.

PyTorch's message (c10/cuda/CUDACachingAllocator.cpp) already carries the numbers, in one of two
wordings: since 2.1 "Tried to allocate 2.00 GiB. GPU 1 has a total capacity of 79.10 GiB of which
1.5 GiB is free. Process 4242 has 3.00 GiB memory in use. Including non-PyTorch memory, this process
has 77.5 GiB memory in use. Of the allocated memory 70 GiB is allocated by PyTorch, and 5 GiB is
reserved by PyTorch but unallocated."; before, "(GPU 0; 4.00 GiB total capacity; 3.08 GiB already
allocated; 0 bytes free; 3.47 GiB reserved in total by PyTorch)". Each number read is kept; a
number the message lacks stays None and is never guessed.
"""
from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from mgtutor.training.foundation.i18n import N_, _
from mgtutor.training.foundation.json_decode import parse
from mgtutor.training.foundation.safe_io import read_regular
from mgtutor.diagnostics.failures.oom.batch import MeasuredBatch, fit_command, measured_batch, run_points
from mgtutor.training.runs.batchfit import DEFAULT_MARGIN
from mgtutor.training.runs.events.reader import read_events
from mgtutor.training.runs.events.types import StepEvent

_SIZE = r"([\d.]+) ?(bytes|B|KiB|MiB|GiB|TiB)"
_UNITS = {"bytes": 1, "B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}
_PATTERNS = {
    "tried": rf"Tried to allocate {_SIZE}",
    "capacity": rf"total capac\w* of {_SIZE}",
    "free": rf"of which {_SIZE} is free",
    "this_process": rf"this process has {_SIZE} memory in use",
    "allocated": rf"Of the allocated memory {_SIZE} is allocated by PyTorch",
    "reserved_unallocated": rf"and {_SIZE} is reserved by PyTorch but unallocated",
    # before PyTorch 2.1
    "old_capacity": rf"; {_SIZE} total capacity",
    "old_allocated": rf"; {_SIZE} already allocated",
    "old_free": rf"; {_SIZE} free",
    "old_reserved": rf"; {_SIZE} reserved in total by PyTorch",
}
_GPU = re.compile(r"GPU (\d+)")
_OTHER = re.compile(rf"Process (\d+) has {_SIZE} memory in use")
GIB = 1 << 30
# the kinds of memory training/worker/trainer/memory_record.py names (kept English in the summary it writes)
KIND_WORDS = {"parameters": N_("parameters"), "gradients": N_("gradients"), "optimizer state": N_("optimizer state"),
              "activations": N_("activations"), "other": N_("other")}
MEMORY_DIR = "memory"  # <run>/memory/rank<R>.json (summary) and rank<R>.pickle (memory_viz snapshot)


def _bytes(number: str, unit: str) -> int:
    return int(float(number) * _UNITS[unit])


def gib(value: float | None) -> str:
    """GiB from 1 GiB up, MiB below: '0.00 GiB' would hide a real 86 MiB."""
    if value is None:
        return "?"
    return f"{value / GIB:.2f} GiB" if value >= GIB else f"{value / (1 << 20):.1f} MiB"


@dataclass
class OomNumbers:
    """What one OOM message says, in bytes."""
    tried: int | None = None
    gpu: int | None = None
    capacity: int | None = None
    free: int | None = None
    this_process: int | None = None
    allocated: int | None = None
    reserved_unallocated: int | None = None
    others: list[tuple[int, int]] = field(default_factory=list)  # (pid, bytes) of other processes on the GPU

    @property
    def outside_pytorch(self) -> int | None:
        """This process's memory the allocator does not hold: CUDA context, cuBLAS/cuDNN, NCCL's buffers."""
        if None in (self.this_process, self.allocated, self.reserved_unallocated):
            return None
        return max(0, self.this_process - self.allocated - self.reserved_unallocated)  # type: ignore[operator]

    @property
    def pytorch_could_hold(self) -> int | None:
        """What PyTorch's allocator could have had on this GPU: its tensors, its unallocated reserve, the free rest."""
        if None in (self.allocated, self.reserved_unallocated, self.free):
            return None
        return self.allocated + self.reserved_unallocated + self.free  # type: ignore[operator]

    @property
    def must_free(self) -> int | None:
        """Bytes that had to be free for the allocation to succeed and were not; the whole request when the
        GPU showed enough free (it was in pieces, or another process took it first)."""
        if self.tried is None or self.free is None:
            return None
        return self.tried - self.free if self.tried > self.free else self.tried


def parse_oom(text: str) -> OomNumbers | None:
    """The numbers of a CUDA OOM message, or None when the text is not one."""
    if "out of memory" not in text:
        return None
    found: dict[str, int] = {}
    for name, pattern in _PATTERNS.items():
        match = re.search(pattern, text)
        if match:
            found[name] = _bytes(match.group(1), match.group(2))
    gpu = _GPU.search(text)
    reserved_total = found.get("old_reserved")
    allocated = found.get("allocated", found.get("old_allocated"))
    unallocated = found.get("reserved_unallocated")
    if unallocated is None and reserved_total is not None and allocated is not None:
        unallocated = max(0, reserved_total - allocated)
    return OomNumbers(tried=found.get("tried"), gpu=int(gpu.group(1)) if gpu else None,
                      capacity=found.get("capacity", found.get("old_capacity")),
                      free=found.get("free", found.get("old_free")), this_process=found.get("this_process"),
                      allocated=allocated, reserved_unallocated=unallocated,
                      others=[(int(m.group(1)), _bytes(m.group(2), m.group(3))) for m in _OTHER.finditer(text)])


@dataclass
class OomExplanation:
    numbers: OomNumbers
    rank: int | None
    other_ranks: dict[int, int] = field(default_factory=dict)  # pid → rank of this run
    memory: dict[str, Any] | None = None  # the --memory summary of the failing rank, when recorded
    # whether the run recorded a step before the OOM (None: no run record to tell); none recorded: the OOM
    # came in the first step (or the run was not measured), and the batch's share of the memory is unknown
    stepped: bool | None = None
    own_worker: bool = False  # mgtutor's own trainer (its batch finder answers), not a user's script
    measured: MeasuredBatch | None = None  # the batch that fits, from steps at two batch sizes or more (oom/batch.py)
    fit_command: str | None = None  # `mgtutor fit … -- SCRIPT ARGS`: what finds the batch of a user's script

    @property
    def weak_bound(self) -> bool:
        """The percentage is a lower bound too weak to be the fix: no step finished before the OOM, so
        what grows with the batch (activations, the optimizer's state made at its first step) was not all
        allocated yet (issue 43: 2 % said, 70 % needed)."""
        return self.stepped is False

    def lower_batch_pct(self) -> int | None:
        """How much smaller the batch must be, at least: the shortfall over the memory that scales with
        the batch (activations when --memory measured them, else all of PyTorch's: a lower bound)."""
        need = self.numbers.must_free
        scaling = (self.memory or {}).get("by_kind", {}).get("activations") or self.numbers.allocated
        if not need or not scaling:
            return None
        return min(100, math.ceil(100 * need / scaling))

    def summary(self) -> str:
        n = self.numbers
        held = [_("{size} in all").format(size=gib(n.capacity))] if n.capacity is not None else []
        held += [_("{size} free").format(size=gib(n.free))] if n.free is not None else []
        parts = [_("GPU {gpu}: {held}").format(gpu=n.gpu if n.gpu is not None else "?",
                                               held=_(", ").join(held) or _("sizes not in the message"))]
        if n.allocated is not None:
            parts.append(_("PyTorch held {size} in tensors").format(size=gib(n.allocated)))
        if n.reserved_unallocated is not None:
            parts.append(_("{size} reserved but unallocated (fragmentation)").format(size=gib(n.reserved_unallocated)))
        if n.outside_pytorch is not None:
            parts.append(_("{size} outside PyTorch (CUDA context, libraries, NCCL)").format(size=gib(n.outside_pytorch)))
        for pid, size in n.others:
            who = f"rank {self.other_ranks[pid]}" if pid in self.other_ranks else _("not a rank of this run")
            parts.append(_("process {pid} ({who}) {size}").format(pid=pid, who=who, size=gib(size)))
        if n.must_free is not None and n.tried is not None and n.free is not None:
            parts.append(_("at least {need} must be freed for the {asked} asked").format(
                need=gib(n.must_free), asked=gib(n.tried)) +
                (_(" ({size} showed free but could not be used)").format(size=gib(n.free)) if n.free >= n.tried else ""))
        return _("; ").join(parts) + _(".")

    def fix(self) -> str:
        n, steps = self.numbers, []
        sharers = sorted({self.other_ranks[pid] for pid, _size in n.others if pid in self.other_ranks})
        if sharers:
            shared = sum(size for pid, size in n.others if pid in self.other_ranks)
            also = (_("ranks {ranks} also use this GPU ({size})") if len(sharers) > 1 else
                    _("rank {ranks} also uses this GPU ({size})")).format(ranks=", ".join(map(str, sharers)),
                                                                         size=gib(shared))
            steps.append(also + _(": give each rank its own GPU with "
                                  "`torch.cuda.set_device(int(os.environ[\"LOCAL_RANK\"]))` before any CUDA work"))
        if n.reserved_unallocated and n.tried and n.reserved_unallocated >= n.tried:
            steps.append(_("{size} is reserved but cut in pieces too small for {asked}: "
                           "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True lets the allocator join them").format(
                size=gib(n.reserved_unallocated), asked=gib(n.tried)))
        pct = self.lower_batch_pct()
        steps += self.batch_steps(pct)
        if self.memory is None and not (self.weak_bound and not self.own_worker):
            steps.append(_("to see what filled the memory, run again with `mgtutor run --memory -- SCRIPT`: it "
                           "records the allocator's history and says which of your lines allocated most"))
        steps.append(_("other ways down: mixed precision (`torch.autocast(\"cuda\", dtype=torch.bfloat16)`), "
                       "activation checkpointing, or sharding the model with FSDP"))
        text = _("; ").join(steps)
        return text[:1].upper() + text[1:] + _(".")

    def finder(self) -> str:
        """The one command that finds the batch that fits."""
        if self.own_worker:
            return _("`mgtutor bench maxbatch` (or train with `--batch-size auto`)")
        return f"`{self.fit_command or 'mgtutor fit -- SCRIPT ARGS'}`"

    def batch_steps(self, pct: int | None) -> list[str]:
        """The batch to use: measured (steps at two batch sizes), else how weak the percentage is and the
        command that measures it."""
        n = self.numbers
        if self.measured is not None:
            m = self.measured
            return [_("the steps before the OOM measured the memory at {fixed} fixed + {sample} per sample (batches "
                      "{batches}): a per-GPU batch of {batch} fits in the {budget} PyTorch could hold here, {margin} "
                      "kept free; keep the global batch with gradient accumulation").format(
                fixed=gib(m.line.fixed_bytes), sample=gib(m.line.per_sample_bytes), batch=m.batch,
                batches=", ".join(str(b) for b, _p in m.points), budget=gib(m.budget_bytes), margin=f"{DEFAULT_MARGIN * 100:g} %")]
        if self.weak_bound:
            why = (_("no step was recorded before the OOM, so the {pct} that these numbers give is only a weak lower "
                     "bound for the batch cut (what grows with the batch was not all allocated yet)").format(
                pct=f"{pct} %") if pct is not None else _("no step was recorded before the OOM"))
            return [why + _(": find the batch that fits with {command}: it runs the script at a few batches, a few "
                            "steps each, and prints the largest that trains on every rank").format(command=self.finder())]
        if pct is None:
            return []
        activations = (self.memory or {}).get("by_kind", {}).get("activations")
        basis = (_("over the {size} of activations").format(size=gib(activations)) if activations else
                 _("over the {size} PyTorch held: a lower bound, more when weights and optimizer "
                   "state are much of it").format(size=gib(n.allocated)))
        return [_("lower the per-GPU batch by at least {pct} (the {need} short {basis}), keeping the global batch "
                  "with gradient accumulation; {command} finds the largest batch that trains").format(
            pct=f"{pct} %", need=gib(n.must_free), basis=basis, command=self.finder())]

    def to_json(self) -> dict[str, Any]:
        n = self.numbers
        out: dict[str, Any] = {k: v for k, v in asdict(n).items() if k != "others"}
        out.update(outside_pytorch=n.outside_pytorch, must_free=n.must_free, lower_batch_pct=self.lower_batch_pct(),
                   lower_bound_weak=self.weak_bound, stepped_before_oom=self.stepped,
                   batch_that_fits=self.measured.to_json() if self.measured else None, fit_command=self.fit_command,
                   other_processes=[{"pid": pid, "bytes": size, "rank": self.other_ranks.get(pid)}
                                    for pid, size in n.others])
        if self.memory is not None:
            out["memory"] = self.memory
        return out


def memory_summary(run_dir: str | Path | None, rank: int | None) -> dict[str, Any] | None:
    """The --memory summary that the failing rank wrote at its OOM, if any."""
    if run_dir is None or rank is None:
        return None
    try:
        data = parse(read_regular(Path(run_dir) / MEMORY_DIR / f"rank{rank}.json"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def memory_lines(memory: dict[str, Any], limit: int = 3) -> list[str]:
    """The --memory summary as a few lines for the terminal."""
    kinds = memory.get("by_kind", {})
    total = sum(kinds.values()) or 1
    out = [_("memory at the OOM (allocated by PyTorch): ") + _(", ").join(
        f"{_(KIND_WORDS.get(name, name))} {gib(size)} ({100 * size / total:.0f} %)"
        for name, size in sorted(kinds.items(), key=lambda kv: -kv[1]))]
    for entry in memory.get("top_lines", [])[:limit]:
        out.append("  " + _("{size} allocated at {file}:{line} ({function})").format(
            size=gib(entry["bytes"]), file=entry["file"], line=entry["line"], function=entry["function"]))
    if memory.get("snapshot"):
        out.append("  " + _("snapshot: {path} (drag it onto https://pytorch.org/memory_viz)").format(
            path=memory["snapshot"]))
    return out


def explain_hits(hits: list[Any], rank: int | None, record: Any = None) -> OomExplanation | None:
    """From the classifier's cuda_oom hits (the failing rank's first) and, for a run, its record:
    rank pids for the other processes on the GPU, and the --memory summary."""
    ordered = sorted(hits, key=lambda h: (h.line.rank != rank, h.order))
    numbers = next((n for h in ordered if (n := parse_oom(h.line.text)) and (n.tried or n.capacity)), None)
    if numbers is None:
        return None
    pids: dict[int, int] = {}
    run_dir = None
    if record is not None:
        run_dir = record.path
        for info in record.ranks():
            for pid in (info.pid, info.wrapper_pid):
                if pid:
                    pids[pid] = info.rank
    others = {pid: pids[pid] for pid, _ in numbers.others if pid in pids}
    stepped, own = (None, False) if record is None else stepped_before(record)
    measured = measured_batch(run_points(record, rank), numbers.pytorch_could_hold) if record is not None else None
    return OomExplanation(numbers, rank, others, memory_summary(run_dir, rank), stepped, own, measured,
                          None if record is None or own else fit_command(record))


def stepped_before(record: Any, max_lines: int = 20_000) -> tuple[bool, bool]:
    """(whether the run recorded a training step, whether it is mgtutor's own worker): a step event of the
    trainer or of the ranks' hook (a user's script under `mgtutor run`)."""
    try:
        stepped = any(isinstance(e, StepEvent) for e in read_events(record.events_path, max_lines))
    except OSError:
        stepped = False
    try:
        own = bool(record.meta().speaks_events())
    except (OSError, ValueError, AttributeError):
        own = False
    return stepped, own
