"""The Monitor's worker side: the messages it posts and what it reads off a run (no widgets here)."""
from __future__ import annotations

import os
from typing import Any

from textual.message import Message

from mgtutor.diagnostics.failures.classify import Finding
from mgtutor.diagnostics.meters import GpuSample, HostSnapshot
from mgtutor.training.runs.forensics.compile_crash import CompileCrash, crashed_while_compiling
from mgtutor.training.runs.events.reader import read_events
from mgtutor.training.runs.net.multinode import NodeState, node_state
from mgtutor.training.runs.records.record import RunRecord, RunResult, RunStatus
from mgtutor.training.runs.follow.runstate import RunState
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


def this_node(record: RunRecord, state: RunState) -> NodeState | None:
    """node_state() for a multi-node run (worker thread); None for a run on one node."""
    meta = record.meta()
    if meta.nnodes < 2:
        return None
    return node_state(meta, record.ranks(), state.phase if state.done else RunStatus.RUNNING)


def compile_crash_of(record: RunRecord, result: RunResult | None) -> CompileCrash | None:
    """A crash inside inductor that ended the run (worker thread: it reads the events file once, at
    the end, rather than keeping every event of a long run in memory for this)."""
    return crashed_while_compiling(result or record.result(), read_events(record.events_path))
