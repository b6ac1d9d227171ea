"""Can mgtutor keep its runs and reports here? The state folder (XDG_STATE_HOME/mgtutor), and the
room left on its disk: a report that says so beats a traceback from the first run."""
from __future__ import annotations

import errno
import os
from typing import Any

from mgtutor.training.runs.launch.disk import free_bytes, os_error_words
from mgtutor.training.runs.records.record import private_state_dir

MIB = 1 << 20


def state_folder_facts() -> dict[str, Any]:
    """{"problem": why the folder cannot be used, or None; "free_mib": room left on its disk, or None}.
    The folder is made when missing, as the first run would."""
    try:
        folder = private_state_dir()
        if not os.access(folder, os.W_OK | os.X_OK, effective_ids=os.access in os.supports_effective_ids):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(folder))
    except OSError as exc:  # a file or /dev/null in its place, a home that does not exist, mode 000
        return {"problem": os_error_words(exc), "free_mib": None}
    free = free_bytes(folder)
    return {"problem": None, "free_mib": None if free is None else free // MIB}
