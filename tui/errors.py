"""The one way a command fails: raise `CliError`; `cli.main` prints it once on stderr and exits with its code."""
from __future__ import annotations

EXIT_FAILED = 1  # it ran and did not succeed: a check failed, a run or a bench failed
EXIT_USAGE = 2  # bad input: a flag, a value, a missing file


class CliError(Exception):
    """A message for the user (one line, no traceback) and the exit code that says what kind of failure it is."""

    def __init__(self, message: str, exit_code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.exit_code = exit_code
