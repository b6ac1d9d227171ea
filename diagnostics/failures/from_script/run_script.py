"""The script a run record ran, and the command that runs it again with one change: what a diagnosis that
names the script's own lines points at (cuda_missing.py, init_skipped.py, store_unreachable.py)."""
from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from mgtutor.diagnostics.check.run_facts import script_model
from mgtutor.diagnostics.check.script_model import ScriptModel


def ran_script(record: Any) -> Path | None:
    """The Python file the run started (its path made absolute with the run's folder), or None for a module."""
    try:
        meta = record.meta()
    except (AttributeError, OSError):
        return None
    script = next((t for t in meta.target if t.endswith(".py")), None)
    if script is None:
        return None
    path = Path(script)
    return path if path.is_absolute() or not meta.cwd else Path(meta.cwd) / path


def ran_model(record: Any) -> tuple[Path, ScriptModel] | None:
    """The script the run started, parsed; None when there is none or it no longer reads."""
    path = ran_script(record)
    model = script_model(path) if path is not None else None
    return (path, model) if path is not None and model is not None else None


def place(path: str | Path, line: int) -> str:
    return f"{Path(path).name}:{line}"


def rerun_text(record: Any, *extra: str) -> str:
    """`mgtutor run --nproc 2 -- train.py --backend=gloo`: the run's own command with `extra` appended, its
    script named as the user's folder sees it."""
    meta = record.meta()
    target = list(meta.target)
    if target and meta.cwd and Path(target[0]).is_absolute():
        try:
            target[0] = str(Path(target[0]).relative_to(meta.cwd))
        except ValueError:
            pass
    nproc = f"--nproc {meta.nproc_per_node} " if meta.nproc_per_node else ""
    return f"mgtutor run {nproc}-- " + shlex.join([*target, *extra])
