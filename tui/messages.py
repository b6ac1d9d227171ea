"""Messages screens post up to the App (and the App down to a screen): the only way they talk.

A screen never calls the App's methods or reads its attributes; it says what happened
(`RunStarted`) or what the user asked for (`OpenLesson`, `OpenRun`), and the App decides.
`post_message` is thread-safe, so a thread worker posts these directly.
"""
from __future__ import annotations

from textual.message import Message

from mgtutor.training.runs.launch.launcher import Run
from mgtutor.training.runs.records.record import RunRecord


class RunStarted(Message):
    """A screen started a run: the App owns it from now on (it outlives the screen)."""

    def __init__(self, run: Run) -> None:
        super().__init__()
        self.run = run


class OpenLesson(Message):
    """Show this lesson in Lessons mode (a diagnosis links to the lesson that teaches its fix)."""

    def __init__(self, lesson_id: str) -> None:
        super().__init__()
        self.lesson_id = lesson_id


class ShowLesson(Message):
    """From the App to the Lessons screen: move to this lesson."""

    def __init__(self, lesson_id: str) -> None:
        super().__init__()
        self.lesson_id = lesson_id


class OpenRun(Message):
    """Show this run (by id) in Monitor mode."""

    def __init__(self, run_id: str) -> None:
        super().__init__()
        self.run_id = run_id


class FindBatch(Message):
    """Find the batch that fits this run's script (`mgtutor fit`): the Monitor's OOM banner asks, the App
    hands it to Troubleshoot's Out of memory."""

    def __init__(self, record: RunRecord) -> None:
        super().__init__()
        self.record = record


class FitScript(Message):
    """From the App to the Troubleshoot screen: run `mgtutor fit` on this run's command."""

    def __init__(self, record: RunRecord) -> None:
        super().__init__()
        self.record = record


class AttachRun(Message):
    """From the App to the Monitor: show this record; `run` is the App's handle when it started the run."""

    def __init__(self, record: RunRecord, run: Run | None) -> None:
        super().__init__()
        self.record = record
        self.run = run
