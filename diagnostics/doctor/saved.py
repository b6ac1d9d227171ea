"""The last doctor report, bench and rendezvous probe, kept so Diagnostics shows them at once next time."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from mgtutor.training.runs.records.record import private_state_dir, read_json, state_home, write_json_atomic
from mgtutor.training.foundation.safe_io import write_private_atomic
from mgtutor.training.foundation.secrets import redact_env

KINDS = ("doctor", "allreduce", "rendezvous")


def saved_path(kind: str) -> Path:
    if kind not in KINDS:
        raise ValueError(f"unknown diagnostics kind {kind!r}")
    return state_home() / "diagnostics" / f"{kind}.json"


def save(kind: str, data: dict[str, Any]) -> Path:
    """Kept 0600 in 0700 folders: a report names hosts, addresses and versions, for this user only."""
    path = saved_path(kind)
    private_state_dir(path.parent.name)
    write_json_atomic(path, data)
    return path


def save_markdown(kind: str, text: str) -> Path:
    """The report as Markdown beside its JSON (`doctor.md`), 0600, written beside and renamed over: a
    symlink planted there is replaced, never followed. OSError when the state folder cannot be written."""
    path = saved_path(kind).with_suffix(".md")
    private_state_dir(path.parent.name)
    write_private_atomic(path, text)
    return path


def load(kind: str) -> dict[str, Any] | None:
    data = read_json(saved_path(kind))
    if not isinstance(data, dict):
        return None
    if isinstance(data.get("environment"), dict):  # a report saved before secrets were hidden
        data["environment"] = redact_env({str(k): str(v) for k, v in data["environment"].items()})
    return data
