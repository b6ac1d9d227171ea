"""A lesson's check results are kept as message ids with their arguments, never as rendered text, and are
said in the reader's language when shown (issue 47, "English left": the Checks tab): a check run in
Chinese reads in English after the switch and back; the Checks tab names steps by their titles, not ids."""
from __future__ import annotations

import json
import re

import pytest
from textual.widgets import Static

from mgtutor.lessons.checks import evaluate
from mgtutor.lessons.loader import all_lessons, get_lesson
from mgtutor.lessons.progress import Progress, passed_without_gpus
from mgtutor.lessons.runner import StepResult, overall, skip_reason, summarize
from mgtutor.training.foundation.i18n import set_language
from mgtutor.training.foundation.said import Said, say_kept
from mgtutor.tui.app import MgTutorApp
from mgtutor.tui.widgets.lesson_text import checks_text
from tests.english_left import english_left
from tests.test_lessons import outcome

CJK = r"[\u4e00-\u9fff]"


def lesson_checked_in(language: str) -> list[StepResult]:
    """Lesson 01's steps as a check leaves them on a machine without a GPU: the first step ran and one
    of its checks failed with rank 1's error, the GPU step was skipped. Made in `language`."""
    set_language(language)
    lesson = get_lesson("01")
    crashed = outcome({0: [], 1: []}, status="failed", first_failure={"rank": 1, "exit_code": 1, "signal": None},
                      stderr={1: "RuntimeError: boom\n"})
    first, gpu = lesson.steps[0], lesson.steps[-1]
    checks = evaluate(first.checks, crashed)
    return [StepResult(lesson.id, first.name, first.title, str(first.script), "failed", checks),
            StepResult(lesson.id, gpu.name, gpu.title, str(gpu.script), "skipped", reason=skip_reason(gpu, gpus=0))]


def test_the_progress_keeps_message_ids_and_arguments_not_chinese_text(tmp_path):
    results = lesson_checked_in("zh")
    progress = Progress(tmp_path / "progress.json")
    progress.record_check("01-check-gpus", overall(results), summarize(results))
    kept = (tmp_path / "progress.json").read_text(encoding="utf-8")
    assert not re.search(CJK, kept), "rendered Chinese was kept"
    step = json.loads(kept)["lessons"]["01-check-gpus"]["checked"]["checks"][0]
    assert step["title"] == {"msg": get_lesson("01").steps[0].title.msgid, "args": {}}
    failed = next(check for check in step["checks"] if check["passed"] is False)
    assert failed["detail"]["msg"] == "rank {rank} failed ({how}): {error}"
    assert failed["detail"]["args"]["how"] == {"msg": "exit code {code}", "args": {"code": 1}}


def test_a_check_kept_in_chinese_reads_in_english_and_back(tmp_path):
    results = lesson_checked_in("zh")
    saved = {"status": overall(results), "checks": summarize(results)}
    lesson = all_lessons()[0]
    chinese = checks_text(saved, lesson).plain
    set_language("en")
    english = checks_text(saved, all_lessons()[0]).plain
    assert "rank 1 failed (exit code 1): RuntimeError: boom" in english
    assert f"{get_lesson('01').steps[0].title} [failed]" in english and "needs 1 NVIDIA GPU(s)" in english
    set_language("zh")
    assert checks_text(saved, all_lessons()[0]).plain == chinese
    assert "rank 1 失败了 (退出码 1)：RuntimeError: boom" in chinese
    assert english_left(chinese, allow=("RuntimeError: boom",)) == []


def test_steps_are_named_by_their_titles_even_in_a_record_kept_before_titles_were():
    lesson = get_lesson("01")
    old = {"status": "skipped", "checks": [{"step": step.name, "status": "skipped", "reason": "needs 1 NVIDIA GPU(s)",
                                            "checks": []} for step in lesson.steps]}
    shown = checks_text(old, lesson).plain
    assert all(step.title in shown for step in lesson.steps)
    assert not any(f"{step.name} [" in shown for step in lesson.steps), shown


def test_a_gpu_skip_is_told_in_any_language_old_or_new():
    set_language("zh")
    new = [{"step": "a", "status": "passed"}, {"step": "b", "status": "skipped",
                                               "reason": skip_reason(get_lesson("01").steps[-1], gpus=0).to_json()}]
    old_chinese = [new[0], {"step": "b", "status": "skipped", "reason": "需要 1 块 NVIDIA GPU；这里没有可用的 NVIDIA GPU"}]
    package = [new[0], {"step": "b", "status": "skipped",
                        "reason": Said("needs the {module} package: {install}", module="x", install="pip").to_json()}]
    assert passed_without_gpus(new) and passed_without_gpus(old_chinese) and not passed_without_gpus(package)


def test_a_kept_said_of_another_shape_is_shown_as_it_can_be_never_raised():
    assert say_kept({"msg": "{missing} here", "args": {}}) == "{missing} here"
    assert say_kept({"msg": 3}) == "" and say_kept(None) == "" and say_kept(["x"]) == ""
    deep: dict = {"msg": "{a}", "args": {}}
    for _ in range(10):
        deep = {"msg": "{a}", "args": {"a": deep}}
    assert isinstance(say_kept(deep), str)


@pytest.mark.integration
async def test_the_checks_tab_follows_a_language_switch(monkeypatch):
    """Checked in Chinese, then `z` on Home: the Lessons screen's Checks tab reads in English."""
    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")
    results = lesson_checked_in("zh")
    progress = Progress()
    progress.record_check("01-check-gpus", overall(results), summarize(results))
    progress.set_current("01-check-gpus")
    progress.set_language("zh")
    set_language("zh")
    app = MgTutorApp()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("l")
        await pilot.pause()
        checks = str(app.screen.query_one("#lesson-checks", Static).render())
        assert "rank 1 失败了 (退出码 1)" in checks and get_lesson("01").steps[0].title in checks
        await pilot.press("h", "z")
        await pilot.pause()
        await pilot.press("l")
        await pilot.pause()
        checks = str(app.screen.query_one("#lesson-checks", Static).render())
        assert "rank 1 failed (exit code 1): RuntimeError: boom" in checks, checks
        assert "[failed]" in checks and not re.search(CJK, checks), checks
