"""`mgtutor runs stacks ID [--json] [--native]`: every rank's Python stack now, saved in the run, and what they say.

A run that still goes gets a fresh capture (py-spy, or the stack hook the launcher loaded into the
ranks) under `stacks/<id>/`, and the hang report made from it; a run that has ended shows the report
of its last saved capture. Called by `mgtutor runs` (tui/commands/runs/__init__.py).
"""
from __future__ import annotations

import json
import sys
from typing import TextIO

from mgtutor.diagnostics.failures.hang.watch import latest_report, take_report
from mgtutor.training.runs.records.record import RunStatus, find_run_why
from mgtutor.training.foundation.i18n import _
from mgtutor.tui.errors import CliError
from mgtutor.tui.run_words import status_word


def stacks_main(run_id: str | None, as_json: bool = False, out: TextIO | None = None, native: bool = False) -> int:
    out = out or sys.stdout
    if not run_id:
        raise CliError(_("{action}: give a run id (see `mgtutor runs`)").format(action="stacks"))
    record, why = find_run_why(run_id)
    if record is None:
        raise CliError(why)
    status = record.status()
    if native and status != RunStatus.RUNNING:
        raise CliError(_("run {id} is {status}: native frames are read from live processes (drop --native to see "
                         "its last capture)").format(id=record.run_id, status=status_word(status)), exit_code=1)
    if status == RunStatus.RUNNING:
        report, capture = take_report(record, reason="on demand", save=True, native=native)
        where = _("captured now in {seconds:.2f} s").format(seconds=capture.seconds)
    else:
        last = latest_report(record)
        capture = None
        if last is None:
            raise CliError(_("run {id} is {status} and has no saved stacks (stacks are taken while a run "
                             "goes)").format(id=record.run_id, status=status_word(status)), exit_code=1)
        report, where = last, _("run {status}: its last capture").format(status=status_word(status))
    if as_json:
        data = {"run_id": record.run_id, "status": status.value, "live": capture is not None, **report.to_dict()}
        print(json.dumps(data, indent=2), file=out)
        return 0
    print(_("stacks of run {id} ({where})").format(id=record.run_id, where=where), file=out)
    print(report.text(), file=out)
    for rank, path in sorted(report.stacks.items()):
        print(f"  rank {rank}: {path}", file=out)
    return 0
