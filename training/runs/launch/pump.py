"""A rank's output carried from a pipe to its log file by the rank wrapper.

A rank that wrote its log files itself would get ENOSPC on its next print once the state disk is
full, and a Python script dies of that (or stops in the middle of a line). Through a pipe the rank
never sees the disk: the wrapper writes what fits, drops what does not and counts it, and keeps
reading, so the training goes on; the run's result says how much was lost (disk.dropped_note).
"""
from __future__ import annotations

import os
import threading
from typing import BinaryIO

CHUNK = 1 << 16


class LogPump:
    """One pipe (its write end is the child's stdout or stderr) and a thread that copies it to `log`."""

    def __init__(self, log: BinaryIO) -> None:
        self.log = log  # kept: its file descriptor lives as long as it does
        self.log_fd = log.fileno()
        self.read_fd, self.write_fd = os.pipe()  # neither is inherited: Popen dup2s write_fd to the child's
        self.dropped = 0
        self.why: str | None = None  # the first write error, e.g. "No space left on device"
        self.thread = threading.Thread(target=self._copy, name=f"log-pump-{self.log_fd}", daemon=True)

    def start(self) -> None:
        """Once the child has its copy of the write end: close ours (EOF comes when the child's goes)."""
        os.close(self.write_fd)
        self.thread.start()

    def finish(self, timeout: float) -> None:
        """Wait for the rest of the output. A process the rank left behind may hold the pipe open:
        after `timeout` s the wrapper goes on (the thread dies with it)."""
        self.thread.join(timeout)

    def _copy(self) -> None:
        while True:
            try:
                chunk = os.read(self.read_fd, CHUNK)
            except OSError:
                return
            if not chunk:
                return
            self._write(chunk)

    def _write(self, chunk: bytes) -> None:
        view = memoryview(chunk)
        while view:
            try:
                view = view[os.write(self.log_fd, view):]
            except OSError as exc:  # ENOSPC, EDQUOT, EIO: the output is lost, the rank goes on
                self.dropped += len(view)
                self.why = self.why or exc.strerror or str(exc)
                return
