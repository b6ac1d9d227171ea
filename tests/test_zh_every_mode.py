"""Every mode in Simplified Chinese at 80×24 says nothing in English but code, commands and names: the
whole text a person can read (drawn rows, each shown widget's full words, the footer) goes through
`english_left`, and the footer's keys are uncut. Home, Lessons (each tab, a run), the Monitor (the form,
a live run), Troubleshoot (every symptom, a diagnosed log), Runs, Help. Where one real run serves both
languages, the Chinese walk is in the English test's file: Diagnostics in test_diagnostics_screen.py, a failed
run in the Monitor in test_monitor_live.py."""
from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Input, OptionList, Static

from mgtutor.diagnostics.failures.demos import SCENARIOS
from mgtutor.training.runs.records.record import RunRecord
from mgtutor.tui.app import MgTutorApp
from mgtutor.tui.screens.help import HelpScreen
from tests.english_left import english_left
from tests.helpers import wait_for_app
from tests.screen_text import rows, screen_text
from tests.test_i18n_tui import footer_uncut, in_chinese, static_text  # noqa: F401  (a fixture)

LOGS = Path(__file__).parent / "data" / "logs"
# The launch form's command line, wrapped onto its next row.
ALLOW = ("--data synthetic", "--steps", "--log-every")
# Lesson 04's last hint is the code itself.
HINT_CODE = ("import DistributedDataParallel", '"cuda" else None)')
# Still English where Troubleshoot shows it, from diagnostics/failures (not marked for the catalogue
# yet): each demo's description, and the GPUs check's name with NVML's reason.
DEMO_WORDS = tuple(scenario.what_happens for scenario in SCENARIOS.values())
GPUS_CHECK = ("· GPUs: ",)
# The script's own words quoted by a finding card (its code line, the fix's code).
SCRIPT_WORDS = ("| ", "⏎")
# A rank's own words quoted by the failure banner and its diagnosis (the injected crash's message).
RANK_WORDS = ("RuntimeError: injected", "injected crash", "raised at step", "at step 3)")


def no_english(screen, allow: tuple[str, ...] = ()) -> str:
    """The screen's words, after asserting that none is English and that the footer is uncut."""
    text = screen_text(screen)
    left = list(dict.fromkeys(english_left(text, allow=ALLOW + allow)))
    assert left == [], type(screen).__name__
    cut = [row for row in rows(screen) if "…" in row]  # Rich marks a cut line so; our Chinese uses ...
    assert cut == [], cut
    footer_uncut(screen)
    return text


async def settle(pilot) -> None:
    await pilot.pause()
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


MODE_TITLES = {"h": "首页", "l": "课程", "m": "监控", "t": "排障", "r": "运行记录"}


@pytest.mark.integration
@pytest.mark.sweep
@pytest.mark.parametrize("keys", ["hl", "mt", "r"])
async def test_home_and_the_help_of_every_mode(in_chinese, keys):
    """The app starts in Chinese; each mode says its title, its footer shows every key of its own uncut, and its
    help reads in Chinese (test_i18n_tui.py's test_the_app_starts_in_chinese_and_every_footer_key_fits walked the
    same modes: it is this walk now)."""
    from tests.test_keys_80x24 import footer_bindings, shown_keys

    app = MgTutorApp()
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for_app(pilot, lambda: "正在查找" not in static_text(app.screen, "#machine"), 30,
                           what="the machine summary")
        await settle(pilot)
        assert app.screen.title == "首页" and "从单卡到多卡" in static_text(app.screen, "#tagline")
        assert "没有 NVIDIA GPU" in no_english(app.screen)
        assert footer_uncut(app.screen) == {"z": "English", "?": "帮助", "q": "退出"}
        for key in keys:
            await pilot.press(key)
            await pilot.pause()
            app.screen.set_focus(None)
            await pilot.pause()
            title = app.screen.title
            assert title == MODE_TITLES[key]
            shown = shown_keys(app.screen)
            assert "?" in shown and "q" in shown
            for binding in footer_bindings(app.screen):
                assert app.get_key_display(binding) in shown, (title, binding)
            footer_uncut(app.screen)
            await pilot.press("question_mark")
            await pilot.pause()
            assert isinstance(app.screen, HelpScreen)
            help_words = no_english(app.screen)
            assert f"mgtutor 按键：{title}" in help_words and "任何地方" in help_words and "在首页切换语言" in help_words
            await pilot.press("escape")
            await pilot.pause()


def test_every_lessons_own_words(in_chinese):
    """What differs from lesson to lesson — its text with the steps and checks, its exercise with every
    hint — read as the Lessons screen renders it, for all 16; the screen itself is read for four (lessons 1-2
    and 15-16) in test_zh_layout_screens.py."""
    from mgtutor.lessons.loader import all_lessons
    from mgtutor.lessons.progress import workspace_copy
    from mgtutor.tui.widgets.lesson_text import exercise_text, lesson_markdown
    from tests.screen_text import plain, prose

    lessons = all_lessons()
    left = {}
    for lesson in lessons:
        copy = workspace_copy(lesson)
        words = [prose(lesson_markdown(lesson, len(lessons))),
                 plain(exercise_text(lesson, lesson.hints, copy, None)),
                 plain(exercise_text(lesson, lesson.hints, copy, "print('the copy')\n"))]
        left[lesson.id] = [line for text in words for line in english_left(text, allow=ALLOW + HINT_CODE)]
    assert {lesson: lines for lesson, lines in left.items() if lines} == {}


# Lessons 1-2 and 15-16, their Lesson, Exercise and Checks tabs at 80x24: in the walk that reads every lesson's text
# row by row (test_zh_layout_screens.py::test_every_lessons_text_at_80x24_breaks_as_chinese, EVERY_TAB).


@pytest.mark.integration
async def test_a_lesson_run_and_its_checks(in_chinese):
    from textual.widgets import RichLog

    from tests.test_i18n_tui import footer_uncut
    from tests.test_lessons_tui import text_of, wait_idle

    app = MgTutorApp()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("l")
        screen = app.screen
        await pilot.press("g")
        await wait_idle(pilot, screen)
        lines = [strip.text for strip in screen.query_one("#lesson-log", RichLog).lines]
        assert lines[0].startswith("── PyTorch 看到了什么: 1 个 rank，gloo"), lines[:3]
        log = "".join(lines)  # wrapped at the pane's width
        assert "── 在每块 GPU 上真正算一次: 跳过：需要 1 块 NVIDIA GPU" in log, log
        checks = text_of(screen, "#lesson-checks")
        assert "– 跳过" in checks and "✓ 脚本运行到了最后" in checks and "PyTorch 数出了它能用的 GPU" in checks
        status = text_of(screen, "#lesson-status")
        assert "在 CPU 上完成" in status and "已完成 1/16 课" in status
        footer_uncut(screen)
        for pane in ("tab-run", "tab-checks"):
            screen.query_one("#lesson-tabs").active = pane
            await pilot.pause()
            no_english(screen)
    assert_lesson01_steps_as_on_cpu()


def assert_lesson01_steps_as_on_cpu() -> None:
    """What test_lessons_runs.py::test_lesson_steps_on_cpu asserts of every other lesson's steps, asserted of lesson
    01's on the run the Lessons screen just made (the same run: lesson 01 on gloo without a GPU): the step that ran
    passed every check (judged again on its record), the GPU step was skipped for want of a GPU."""
    from mgtutor.lessons.checks import evaluate, outcome_of
    from mgtutor.lessons.loader import get_lesson
    from mgtutor.lessons.progress import Progress
    from mgtutor.training.foundation.said import kept_in_english
    from mgtutor.training.runs.records.record import find_run

    lesson = get_lesson("01")
    saved = Progress().lesson(lesson.id)
    checked = {step["step"]: step for step in saved["checked"]["checks"]}
    assert [step.name for step in lesson.steps] == list(checked)
    for step in lesson.steps:
        said = checked[step.name]
        if step.gpu_only:
            assert said["status"] == "skipped" and "GPU" in kept_in_english(said["reason"]), said
            continue
        assert said["status"] == "passed" and said["checks"] and all(c["passed"] for c in said["checks"]), said
        record = find_run(saved["steps"][step.name]["run_id"])
        judged = evaluate(step.checks, outcome_of(record))
        assert all(c.passed for c in judged), [(c.says, c.detail) for c in judged]


@pytest.mark.integration
async def test_the_monitor_form_and_a_live_run(in_chinese):
    from tests.snapshots.monitor_fixture_app import FixtureApp, show_fixture_run

    app = FixtureApp()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("m")
        await settle(pilot)
        no_english(app.screen)
        form = app.screen.query_one("#launch-form")
        for field, wrong in (("#f-steps", "0"), ("#f-batch-size", "x"), ("#f-inject-rank", "5")):
            if field == "#f-inject-rank":
                form.query_one("#f-inject").value = "crash-rank"
            form.query_one(field).value = wrong
            await pilot.pause()
            assert "收到" in no_english(app.screen) or "没有 rank" in no_english(app.screen)
            form.query_one(field).value = {"#f-steps": "40", "#f-batch-size": "32", "#f-inject-rank": "1"}[field]
        form.query_one("#f-inject").value = "none"
        form.query_one("#f-backend").value = "nccl"  # refused before anything starts: no GPU here
        form.query_one("#f-nproc").focus()
        await pilot.press("enter")
        await wait_for_app(pilot, lambda: "nccl 后端需要" in str(form.query_one("#form-message").render()), 10,
                           what="the launch refused")
        no_english(app.screen)
        form.query_one("#f-backend").value = "auto"
        await show_fixture_run(pilot)
        assert "训练中" in no_english(app.screen, allow=("NVIDIA H200",))
        await the_check_panel_and_the_alerts(pilot)


async def the_check_panel_and_the_alerts(pilot) -> None:
    """On the Monitor's run: the script check's panel, then the alert banner (each was a test of its own, on the
    same fixture run: test_the_monitor_check_panel, test_the_monitor_alerts)."""
    import time

    from mgtutor.diagnostics.check.script import check_file
    from mgtutor.training.runs.follow.detectors import Alert, RunWatch, rendezvous_message
    from mgtutor.tui.widgets.check_panel import CheckPanel
    from mgtutor.tui.widgets.run_state import AlertBanner
    from tests.test_check_patch_tui import SCRIPT

    screen = pilot.app.screen
    panel = screen.query_one(CheckPanel)
    panel.show(str(SCRIPT), [finding.to_json() for finding in check_file(SCRIPT)])
    panel.collapsed = False
    await settle(pilot)
    no_english(screen, allow=("NVIDIA H200",))
    assert "条建议" in panel.title and "[安全修复：F 查看]" in str(screen.query_one("#check-findings").render())

    silent = RunWatch(screen.record, rendezvous_after=0, silent_after=1).poll(screen.state, time.time() + 600)
    assert [alert.kind for alert in silent] == ["possibly_hung"]
    late = Alert("rendezvous_late", (1,), rendezvous_message([1], [], [0], 31.0))
    screen.query_one(AlertBanner).show([late, *silent])
    await settle(pilot)
    banner = str(screen.query_one(AlertBanner).render())
    assert "可能卡住了" in banner and "最后一行" in banner
    no_english(screen, allow=("NVIDIA H200", "最后一行："))  # the ranks' last lines are their own


# A failed run in the Monitor (the real trainer's crash on rank 1, launched from the form): in Chinese, then the
# same record in English, test_monitor_live.py::test_crash_on_rank_1_shows_the_banner_with_rank_and_exit_code.


@pytest.mark.integration
@pytest.mark.sweep
@pytest.mark.parametrize("half", [0, 1])
async def test_troubleshoot_every_symptom(in_chinese, half):
    app = MgTutorApp()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("t")
        screen = app.screen
        await settle(pilot)
        no_english(screen)
        options = screen.query_one("#ts-symptoms", OptionList)
        middle = (options.option_count + 1) // 2
        for index in range(half * middle, middle if half == 0 else options.option_count):
            options.highlighted = index
            options.focus()
            await pilot.press("enter")
            await settle(pilot)
            no_english(screen, allow=DEMO_WORDS + GPUS_CHECK)


@pytest.mark.sweep
@pytest.mark.parametrize("log", ["collective_timeout_nccl.log", "cuda_oom_old.log", "rendezvous_timeout_server.log"])
async def test_troubleshoot_a_diagnosed_log(in_chinese, log):
    app = MgTutorApp()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("t")
        screen = app.screen
        field = screen.query_one("#ts-input", Input)
        field.value = str(LOGS / log)
        field.focus()
        await pilot.press("enter")
        await wait_for_app(pilot, lambda: screen.findings, 30, what="the diagnosis")
        await settle(pilot)
        no_english(screen, allow=(str(LOGS),))


# Every tab of Diagnostics in Chinese, the bench and the probe run from it, then the same reports in English
# without running the doctor again: test_diagnostics_screen.py::test_doctor_bench_and_probe_from_the_screen_in_chinese_then_english
# (one doctor, one bench and one probe for both languages).


def finished_and_failed_runs(write_script) -> list[RunRecord]:
    from mgtutor.training.runs.launch.launcher import LaunchSpec, launch
    from tests.monitor_helpers import EVENT_SCRIPT

    script = str(write_script("events.py", EVENT_SCRIPT))
    runs = [launch(LaunchSpec(target=[script, "4"], nproc=2, backend="gloo", label="finished")),
            launch(LaunchSpec(target=[script, "8", "1"], nproc=2, backend="gloo", label="crash"))]
    for run in runs:
        run.wait(120)
    return [run.record for run in runs]


@pytest.mark.integration
async def test_runs_with_a_finished_and_a_failed_run(in_chinese, write_script, standin_torchrun):
    # The runs are torch-free scripts: the stand-in torchrun starts their ranks (what Runs shows is the run layer's).
    records = finished_and_failed_runs(write_script)
    app = MgTutorApp()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("r")
        table = app.screen.query_one("#runs-table")
        await wait_for_app(pilot, lambda: table.row_count == 2, 30, what="the runs table")
        text = no_english(app.screen, allow=(str(records[0].path.parent),))
        assert "已结束" in text and "失败" in text and "rank 1" in text
        assert "运行记录" in str(app.screen.query_one("#runs-root", Static).render())


async def test_troubleshoot_the_oom_actions_without_a_gpu(in_chinese):
    app = MgTutorApp()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("t")
        screen = app.screen
        options = screen.query_one("#ts-symptoms", OptionList)
        await pilot.press("b")  # before the symptom is picked: b and w say where they belong
        assert "显存不足" in no_english(screen)
        options.highlighted = [o.id for o in options._options].index("oom")
        options.focus()
        await pilot.press("enter")
        await settle(pilot)
        await pilot.press("b")
        await settle(pilot)
        assert "NVIDIA GPU" in str(screen.query_one("#ts-status", Static).render())
        no_english(screen, allow=DEMO_WORDS)


@pytest.mark.integration
async def test_troubleshoot_a_demo_run_and_its_diagnosis(in_chinese, standin_torchrun):
    # The crash demo's ranks are the real trainer on gloo; the stand-in torchrun starts them (what is read is the
    # screen's words, the ranks' failure and mgtutor's diagnosis of it, not torchrun's own lines).
    app = MgTutorApp()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("t")
        screen = app.screen
        options = screen.query_one("#ts-symptoms", OptionList)
        options.highlighted = [o.id for o in options._options].index("nccl")
        options.focus()
        await pilot.press("enter")
        await settle(pilot)
        await pilot.press("x")
        await wait_for_app(pilot, lambda: not screen.busy, 240, what="the demo")
        await settle(pilot)
        assert screen.findings
        assert "演示" in no_english(screen, allow=DEMO_WORDS + GPUS_CHECK + RANK_WORDS)


def test_the_run_layer_says_its_records_in_chinese(in_chinese, tmp_path):
    """What the run layer keeps in English (meta.json's device note, NVML's reason) and the lines it
    makes while a run goes (the live alerts, the stall clock's reason, torchrun's folded traceback)
    read in Chinese."""
    from mgtutor.training.runs.launch.launcher import said_device_note
    from mgtutor.training.runs.records.record import RunMeta
    from mgtutor.training.runs.follow.stall import StallClock
    from mgtutor.training.runs.follow.torchrun_fold import fold_text
    from mgtutor.training.runs.follow.detectors import rendezvous_message
    from tests.test_hang_stall import T0, State, record_with_logs

    notes = ["2 CPU ranks on gloo — no NVIDIA GPU (NVML disabled by MGTUTOR_NO_NVML)",
             "2 CPU ranks on gloo (GPUs present, gloo chosen)",
             "2× NVIDIA H200 (driver 570.1): ranks on NCCL"]
    said = [said_device_note(RunMeta(device_note=note)) for note in notes]  # records of before device_said
    assert said[0] == "2 个 CPU rank，用 gloo —— 没有 NVIDIA GPU (NVML 已被 MGTUTOR_NO_NVML 关闭)"
    assert said[2] == "2× NVIDIA H200 (驱动 570.1)：rank 用 NCCL"
    block = ["Traceback (most recent call last):", "Root Cause (first observed failure):", "[0]:",
             "  rank      : 1 (local_rank: 1)", "  exitcode  : 1 (pid: 42)"]
    stall = StallClock(record_with_logs(tmp_path, T0), quiet_s=5).check(State(), T0 + 6)
    assert stall == "所有 rank 已经 6 秒没有输出、也没有事件"
    lines = said + [stall, fold_text(block), rendezvous_message([1], [1], [0], 31.0)]
    assert english_left("\n".join(lines)) == [], lines
    assert lines[-2].startswith("torchrun 报告 rank 1 失败 (退出码 1)"), lines[-2]


@pytest.mark.integration
async def test_troubleshoot_a_script_its_findings_and_the_fixes_as_a_diff(in_chinese, tmp_path):
    from mgtutor.tui.screens.confirm import ConfirmScreen
    from mgtutor.tui.screens.patch import PatchScreen
    from tests.test_check_patch_tui import SCRIPT
    from tests.test_troubleshoot_check import _give_script, _pick

    script = tmp_path / "demo.py"
    script.write_text(SCRIPT.read_text())
    app = MgTutorApp()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("t")
        screen = app.screen
        await _pick(pilot, screen, "one-gpu")
        await _give_script(pilot, str(script))
        await wait_for_app(pilot, lambda: bool(screen.script_findings), 30, what="the script's findings")
        await settle(pilot)
        no_english(screen, allow=DEMO_WORDS + GPUS_CHECK + SCRIPT_WORDS)
        screen.query_one("#ts-symptoms").focus()
        await pilot.press("F")
        patch = await wait_for_app(pilot, lambda: app.screen if isinstance(app.screen, PatchScreen) else None)
        await pilot.pause()
        assert "处安全修复" in no_english(patch)
        await pilot.press("a")
        await wait_for_app(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.pause()
        assert "写入 (y)" in no_english(app.screen)
        await pilot.press("n")


# Quitting while a run goes, in Chinese: test_i18n_tui.py::test_switching_language_leaves_a_running_run_alone (the
# same tracked run, asked about before the switch back).


async def test_runs_with_broken_records(in_chinese):
    from tests.test_runs_screen_broken import _run

    _run("good")
    _run("typed", meta={"started": "yesterday", "target": None, "world_size": "two"},
         result={"status": "failed", "first_failure": 5})
    app = MgTutorApp()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("r")
        table = app.screen.query_one("#runs-table")
        await wait_for_app(pilot, lambda: table.row_count == 2, 30, what="the runs table")
        # the record's own field names and values are quoted as they are
        assert "类型不对：started 是 'yesterday'" in no_english(app.screen, allow=("'yesterday'，target 是",))


# The Monitor's hang panel in Chinese: in the test that reads its rows at 80x24, on the same screen
# (test_zh_layout_screens.py::test_a_hang_report_at_80x24_breaks_as_chinese).


def test_the_topology_of_two_gpus(in_chinese):
    from mgtutor.tui.widgets.diagnostics_text import topology_text

    gpus = [{"index": i, "name": "NVIDIA H200", "memory_total_mib": 143771, "compute_capability": "9.0",
             "pcie_gen": 5, "pcie_width": 16, "nvlink_links_up": 18} for i in (0, 1)]
    report = {"gpus": gpus, "topology": {"matrix": "      GPU0  GPU1\nGPU0   X    NV18\nGPU1  NV18   X"},
              "checks": []}
    text = topology_text(report).plain
    assert "NVLink 18 条链路在线" in text and english_left(text) == [], text


async def test_the_runs_headers_follow_a_switch_of_language():
    """Runs opened in English, then `z` on Home: back in Runs, its column headers and statuses are Chinese."""
    from tests.test_runs_screen_broken import _run

    _run("good")
    app = MgTutorApp()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("r")
        table = app.screen.query_one("#runs-table")
        await wait_for_app(pilot, lambda: table.row_count == 1, 30, what="the runs table")
        assert [str(column.label) for column in table.columns.values()][:2] == ["run", "status"]
        await pilot.press("h")
        await settle(pilot)
        await pilot.press("z")
        await settle(pilot)
        await pilot.press("r")
        await settle(pilot)
        table = app.screen.query_one("#runs-table")
        await wait_for_app(pilot, lambda: table.row_count == 1, 30, what="the runs table again")
        assert [str(column.label) for column in table.columns.values()][:2] == ["运行", "状态"]
        assert "已结束" in no_english(app.screen)


def test_a_run_s_device_note_is_kept_as_a_message_id_and_said_in_the_reader_s_language(monkeypatch):
    """meta.json keeps the note in English and as a message id with its arguments: a run launched in English
    reads in Chinese later, and the reason NVML gave is said too."""
    from mgtutor.training.foundation.i18n import set_language
    from mgtutor.training.runs.launch.launcher import LaunchSpec, device_note, plan, said_device_note
    from mgtutor.training.runs.records.record import RunMeta

    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")
    the_plan = plan(LaunchSpec(target=["t.py"], nproc=2, backend="gloo"))
    note = device_note(the_plan)
    meta = RunMeta.from_json({"device_note": str(note), "device_said": note.to_json()})
    assert meta.device_note == "2 CPU ranks on gloo — no NVIDIA GPU (NVML disabled by MGTUTOR_NO_NVML)"
    set_language("zh")
    assert said_device_note(meta) == "2 个 CPU rank，用 gloo —— 没有 NVIDIA GPU (NVML 已被 MGTUTOR_NO_NVML 关闭)"
    assert said_device_note(RunMeta.from_json(meta.to_json())) == said_device_note(meta)  # as meta.json keeps it
