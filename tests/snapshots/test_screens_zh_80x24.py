"""Home, Lessons, Help, Troubleshoot and the Monitor's launch form in Simplified Chinese at 80×24: each
CJK character takes two cells, and nothing is cut — the footer keys, the way-forward grid, the lesson
list and text, the help window, the symptom list, the form's labels."""
from __future__ import annotations

import pytest

from mgtutor.training.runs.i18n import set_language
from mgtutor.tui.app import MgTutorApp


async def wait_settled(pilot) -> None:
    await pilot.pause(0.5)
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


@pytest.mark.parametrize("keys", [["h"], ["l"], ["h", "question_mark"], ["t"], ["m"]],
                         ids=["home", "lessons", "help", "troubleshoot", "monitor-launch-form"])
def test_screen_in_chinese_at_80x24(snap_compare, keys, monkeypatch):
    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")
    set_language("zh")
    assert snap_compare(MgTutorApp(), press=keys, run_before=wait_settled, terminal_size=(80, 24))
