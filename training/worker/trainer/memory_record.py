"""`mgtutor run --memory`: run a rank's script with the CUDA allocator's history recorded, and at an OOM
save the snapshot (for PyTorch's memory_viz) and a summary of what filled the memory.

    python -m mgtutor.training.worker.trainer.memory_record SCRIPT ARGS…   |   … -m MODULE ARGS…

The rank wrapper (training/runs/launch/rank.py) puts this in front of the user's command when asked: the
history costs time on every allocation, so it is never on by default. At the OOM, PyTorch calls
the observer before it raises; the observer writes `<run>/memory/rank<R>.pickle`
(torch.cuda.memory._snapshot(), what `_dump_snapshot` writes) and `rank<R>.json`: the allocated
bytes by kind — parameters, gradients and optimizer state found by their tensors' addresses,
activations for the rest allocated while the script ran, other for what has no stack — and the
script's own lines that allocated most.
"""
from __future__ import annotations

import gc
import json
import os
import pickle
import runpy
import sys
import sysconfig
from collections import defaultdict
from pathlib import Path
from typing import Any

import torch

RUN_DIR_ENV = "MGTUTOR_RUN_DIR"
MAX_ENTRIES = 100_000
_LIBRARY_DIRS = tuple({sysconfig.get_paths()[k] for k in ("stdlib", "purelib", "platlib")} |
                      {os.path.dirname(torch.__file__), os.path.dirname(__file__)})


def tensor_kinds(device: int) -> list[tuple[int, int, str]]:
    """(start, end, kind) of every parameter, gradient and optimizer-state tensor alive on `device`."""
    spans: list[tuple[int, int, str]] = []

    def add(tensor: Any, kind: str) -> None:
        if isinstance(tensor, torch.Tensor) and tensor.is_cuda and tensor.device.index == device:
            start = tensor.untyped_storage().data_ptr()
            spans.append((start, start + tensor.untyped_storage().nbytes(), kind))

    for obj in gc.get_objects():
        if isinstance(obj, torch.nn.Module):
            for param in obj.parameters(recurse=False):
                add(param, "parameters")
                add(param.grad, "gradients")
        elif isinstance(obj, torch.optim.Optimizer):
            for state in obj.state.values():
                for value in state.values():
                    add(value, "optimizer state")
    return spans


def user_frame(frames: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The innermost frame in the user's own code (not torch, not a library, not Python itself)."""
    for frame in frames:
        name = frame.get("filename", "")
        if name.endswith(".py") and not name.startswith(_LIBRARY_DIRS) and not name.startswith("<"):
            return frame
    return None


def summarise(snapshot: dict[str, Any], device: int, spans: list[tuple[int, int, str]]) -> dict[str, Any]:
    by_kind: dict[str, int] = defaultdict(int)
    by_line: dict[tuple[str, int, str], int] = defaultdict(int)
    for segment in snapshot.get("segments", []):
        if segment.get("device") != device:
            continue
        for block in segment.get("blocks", []):
            if block.get("state") != "active_allocated":
                continue
            start, size = block["address"], block["size"]
            kind = next((k for s, e, k in spans if start <= s < start + size or s <= start < e), None)
            frames = block.get("frames") or []
            by_kind[kind or ("activations" if frames else "other")] += size
            frame = user_frame(frames)
            if frame is not None:
                by_line[(frame["filename"], frame["line"], frame.get("name", "?"))] += size
    top = sorted(by_line.items(), key=lambda kv: -kv[1])[:5]
    return {"by_kind": dict(by_kind), "total_bytes": sum(by_kind.values()),
            "top_lines": [{"file": f, "line": n, "function": fn, "bytes": b} for (f, n, fn), b in top]}


class OomRecorder:
    def __init__(self, run_dir: Path, rank: int) -> None:
        self.folder, self.rank, self.done = run_dir / "memory", rank, False

    def __call__(self, device: int, alloc: int, device_alloc: int, device_free: int) -> None:
        if self.done:  # a script that catches OOM and retries: the first one is the one to read
            return
        self.done = True
        try:
            self.folder.mkdir(mode=0o700, exist_ok=True)
            snapshot = torch.cuda.memory._snapshot()
            pickle_path = self.folder / f"rank{self.rank}.pickle"
            with open(pickle_path, "wb") as handle:
                pickle.dump(snapshot, handle)
            summary = summarise(snapshot, device, tensor_kinds(device))
            summary.update(snapshot=str(pickle_path), device=device, requested_bytes=alloc, free_bytes=device_free,
                           allocator={"allocated_bytes": torch.cuda.memory_allocated(device),
                                      "reserved_bytes": torch.cuda.memory_reserved(device)})
            (self.folder / f"rank{self.rank}.json").write_text(json.dumps(summary, indent=1))
            print(f"mgtutor --memory: rank {self.rank} ran out of memory; snapshot saved to {pickle_path}",
                  file=sys.stderr, flush=True)
        except Exception as exc:  # the user's own OOM must still be raised, whatever happens here
            print(f"mgtutor --memory: could not save the memory snapshot: {exc}", file=sys.stderr, flush=True)


def main(argv: list[str]) -> int:
    if not argv or argv == ["-m"]:
        print("usage: python -m mgtutor.training.worker.trainer.memory_record (-m MODULE | SCRIPT) [ARGS...]", file=sys.stderr)
        return 2
    run_dir = Path(os.environ.get(RUN_DIR_ENV) or ".")
    if torch.cuda.is_available():
        torch.cuda.memory._record_memory_history(max_entries=MAX_ENTRIES, stacks="python")
        attach = getattr(torch._C, "_cuda_attach_out_of_memory_observer")  # private, no stub: called as PyTorch's docs do
        attach(OomRecorder(run_dir, int(os.environ.get("RANK", "0"))))
    else:
        print("mgtutor --memory: no CUDA device in this rank: nothing to record", file=sys.stderr, flush=True)
    if argv[0] == "-m":
        sys.argv = [argv[1], *argv[2:]]
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = list(argv)
        sys.path.insert(0, os.path.dirname(os.path.abspath(argv[0])))
        runpy.run_path(argv[0], run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
