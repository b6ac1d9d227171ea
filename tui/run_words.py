"""A run's status and each rank's outcome in the reader's words: the record keeps the English values
("failed", "stopped after the first failure"), which `--json` prints as they are."""
from __future__ import annotations

import os
from pathlib import Path

from mgtutor.training.foundation.i18n import N_, _
from mgtutor.training.foundation.safe_io import write_private_atomic

# A script that runs mgtutor and needs the record (lesson 14's read_hang.py) names a file here: the record's
# path is written to it, so the script never reads the words of the line, which follow the language.
RECORD_FILE_ENV = "MGTUTOR_RECORD_FILE"

STATUS_WORDS = {"running": N_("running"), "running, detached": N_("running, detached"), "finished": N_("finished"),
                "failed": N_("failed"), "stopped": N_("stopped"), "lost": N_("lost"), "unreadable": N_("unreadable")}
OUTCOME_WORDS = {"ok": N_("ok"), "failed": N_("failed"), "stopped": N_("stopped"),
                 "stopped after the first failure": N_("stopped after the first failure"),
                 "never started": N_("never started"), "no exit recorded": N_("no exit recorded")}


def status_word(value: object) -> str:
    """A status as the reader says it; a value no version of mgtutor wrote, as it is."""
    text = str(getattr(value, "value", value))
    return _(STATUS_WORDS[text]) if text in STATUS_WORDS else text


def outcome_word(value: str) -> str:
    return _(OUTCOME_WORDS[value]) if value in OUTCOME_WORDS else value


def record_line(path: Path) -> str:
    """The line that ends a command that launched a run: where its record is. Also writes the path to the
    file $MGTUTOR_RECORD_FILE names, if any (a file that cannot be written is left: the line still says it)."""
    target = os.environ.get(RECORD_FILE_ENV)
    if target:
        try:
            write_private_atomic(Path(target), f"{path}\n")
        except OSError:
            pass
    return _("run record: {path}").format(path=path)
