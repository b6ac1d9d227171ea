"""Text from a run (a rank's log line, a record's command or label) made safe to put on a terminal.

A record is written by anyone who can write the run's folder: an OSC 52 escape in its `target` would
set the clipboard of whoever runs `mgtutor runs show`, a cursor move would rewrite what is on screen.
Every view (the CLI's lines, the TUI's logs) shows such text through `neutralise`.
"""
from __future__ import annotations

import re

# CSI/OSC/other escape sequences (a rank's colours or cursor moves), then any other control char.
_ESCAPES = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])|\x9b[0-?]*[ -/]*[@-~]")
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def neutralise(line: str) -> str:
    """Text safe to put on our terminal: escape sequences dropped, other control chars shown as '?'."""
    if line.isprintable():
        return line  # the common case, checked in C
    line = _ESCAPES.sub("", line).expandtabs(4)
    return _CONTROLS.sub("?", line)
