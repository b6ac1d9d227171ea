"""The Monitor's worker side: the messages it posts and what it reads off a run (no widgets here)."""
from __future__ import annotations

import os
from typing import Any

from textual.message import Message

from mgtutor.diagnostics.failures.classify import Finding
from mgtutor.diagnostics.meters import GpuSample, HostSnapshot
from mgtutor.training.runs.follow.runstate import RunState
from mgtutor.training.runs.forensics.compile_crash import CompileCrash
from mgtutor.training.runs.net.multinode import NodeState
from mgtutor.training.runs.follow.detectors import Alert
from mgtutor.tui.widgets.rank_logs import prepare_lines


class RunUpdate(Message):
    """One tick of a watched run: new log lines, and (at most 4 Hz) its state and meters."""

    def __init__(self, run_id: str, lines: list[tuple[int | None, str, str]], state: RunState | None,
                 sample: tuple[GpuSample, HostSnapshot] | None, finding: Finding | None = None,
                 alerts: list[Alert] | None = None, node: NodeState | None = None,
                 compile_crash: CompileCrash | None = None) -> None:
        super().__init__()
        self.run_id, self.lines, self.state, self.sample, self.finding = run_id, lines, state, sample, finding
        self.alerts = alerts  # None: not polled this tick (the banner keeps what it shows)
        self.node = node  # this node of a multi-node job (None: single node, or not read this tick)
        self.compile_crash = compile_crash  # the last update of a run that the compiler crashed
        self.prepared = prepare_lines(lines)  # per-tab split and prefixes, made in the sending thread


class CheckDone(Message):
    """`mgtutor check`'s findings on the script just launched (or why it could not be read)."""

    def __init__(self, token: int, script: str, findings: list[dict[str, Any]], error: str | None) -> None:
        super().__init__()
        self.token, self.script, self.findings, self.error = token, script, findings, error


def script_of(spec: Any) -> str | None:
    """The path of the user's script a launch runs, or None for a module (our trainer)."""
    target = list(getattr(spec, "target", []) or [])
    if not target or target[0] == "-m":
        return None
    path = target[0]
    return os.path.join(spec.cwd, path) if getattr(spec, "cwd", None) and not os.path.isabs(path) else path

