"""Run a past run's script again with the allocator's history recorded (`mgtutor run --memory`), so that
its OOM says what filled the memory: Troubleshoot → Out of memory → w. Headless; follows the run
with the one session loop and returns the diagnosis, the --memory summary in its numbers."""
from __future__ import annotations

from collections.abc import Callable

from mgtutor.diagnostics.failures.classify import Finding
from mgtutor.diagnostics.failures.hang.watch import diagnose_with_hangs
from mgtutor.training.runs.launch.launcher import LaunchSpec, Run, launch
from mgtutor.training.runs.launch.rank import MEMORY_ENV
from mgtutor.training.runs.records.record import RunRecord
from mgtutor.training.runs.follow.session import RunSession, follow_to_end


class RerunError(Exception):
    """The past run cannot be started again (no target recorded), in one line."""


def rerun_with_memory(record: RunRecord, on_line: Callable[[int | None, str], None] | None = None,
                      on_start: Callable[[Run], None] | None = None, timeout_s: float = 1800) -> tuple[Run, list[Finding]]:
    meta = record.meta()
    if not meta.target:
        raise RerunError(f"run {record.run_id} recorded no command to run again")
    run = launch(LaunchSpec(target=list(meta.target), nproc=meta.nproc_per_node or None,
                            backend=meta.backend or "auto", label=f"{meta.label or 'run'}-memory",
                            env={MEMORY_ENV: "1"}, cwd=meta.cwd or None))
    if on_start:
        on_start(run)
    final = follow_to_end(RunSession(run.record, run, timeout_s=timeout_s, diagnose=diagnose_with_hangs), on_line)
    return run, list(final.findings)
