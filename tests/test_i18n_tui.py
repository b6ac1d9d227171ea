"""The app in Chinese at 80×24: switched on Home with z (kept with the progress), every mode says its words
anew, a running run goes on; Textual's own words. The app chosen in Chinese before start, each mode's footer keys
uncut and its help: test_zh_every_mode.py::test_home_and_the_help_of_every_mode."""
from __future__ import annotations

import pytest
from rich.cells import cell_len
from textual.app import App, ComposeResult
from textual.widgets import Markdown, Select, Static, TabbedContent
from textual.widgets._footer import FooterKey

from mgtutor.lessons.progress import Progress
from mgtutor.training.foundation.i18n import current_language, set_language
from mgtutor.training.runs.launch.launcher import LaunchSpec, launch
from mgtutor.tui.app import MgTutorApp
from tests.helpers import wait_for_app

SLEEPS = "import time\ntime.sleep(600)\n"


@pytest.fixture
def in_chinese(monkeypatch):
    """No GPU, said the same way every time, and the app in Simplified Chinese from its start."""
    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")
    set_language("zh")


def static_text(screen, selector: str) -> str:
    return str(screen.query_one(selector, Static).render())


def footer_uncut(screen) -> dict[str, str]:
    """Each footer key's words fit in the cells it was given, all within 80 columns."""
    keys = {}
    for key in screen.query(FooterKey):
        if key.region.width:
            needed = cell_len(key.key_display) + 1 + cell_len(key.description)
            assert key.region.width >= needed and key.region.right <= 80, (key.key_display, key.description,
                                                                           key.region)
            keys[key.key_display] = key.description
    return keys


# The app started in Chinese, each mode's title, footer keys and help: test_zh_every_mode.py's
# test_home_and_the_help_of_every_mode (one walk for both).


@pytest.mark.integration
async def test_z_on_home_switches_every_mode_and_keeps_the_choice(monkeypatch):
    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")
    app = MgTutorApp()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("l")  # Lessons drawn in English first
        await pilot.pause()
        assert "Check your GPUs" in str(app.screen.query(".lesson-title").first().render())
        await pilot.press("h", "z")
        await wait_for_app(pilot, lambda: app.screen.title == "首页", 10, what="Home in Chinese")
        assert current_language() == "zh" and Progress().language == "zh"
        assert "这台机器" in str(app.screen.query(".section-title").first().render())
        await pilot.press("l")
        await pilot.pause()
        lessons = app.screen
        assert lessons.title == "课程"
        assert "检查 GPU 和 CUDA" in str(lessons.query(".lesson-title").first().render())
        tabs = lessons.query_one("#lesson-tabs", TabbedContent)
        assert [str(tabs.get_tab(pane).label) for pane in ("tab-text", "tab-checks")] == ["课程", "检查项"]
        markdown = lessons.query_one("#lesson-markdown", Markdown)
        assert "第 1 课" in markdown.source and "## 要看什么" in markdown.source
        await pilot.press("h", "z")  # and back
        await wait_for_app(pilot, lambda: app.screen.title == "Home", 10, what="Home in English")
        await pilot.press("l")
        await pilot.pause()
        assert "Check your GPUs" in str(app.screen.query(".lesson-title").first().render())
    assert Progress().language == "en"


@pytest.mark.integration
async def test_switching_language_leaves_a_running_run_alone(monkeypatch, write_script, standin_torchrun):
    # A torch-free run started by the stand-in torchrun: the app's own hold on it is what a switch could lose. In
    # Chinese, quitting asks about it first (this was test_zh_every_mode.py's test_quitting_while_a_run_goes).
    from mgtutor.tui.screens.quit import QuitScreen
    from tests.test_zh_every_mode import no_english, settle

    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")
    run = launch(LaunchSpec(target=[str(write_script("sleep.py", SLEEPS))], nproc=2, backend="gloo"))
    try:
        app = MgTutorApp()
        async with app.run_test(size=(80, 24)) as pilot:
            app.track_run(run)
            supervisor = run.record.meta().supervisor_pid
            await pilot.press("z")
            await wait_for_app(pilot, lambda: app.screen.title == "首页", 10, what="Home in Chinese")
            await pilot.press("q")
            await wait_for_app(pilot, lambda: isinstance(app.screen, QuitScreen), 10, what="the quit dialog")
            await settle(pilot)
            text = no_english(app.screen)
            assert "个运行还在进行" in text and "(s)" in text, text  # the buttons are drawn
            await pilot.press("escape")
            await wait_for_app(pilot, lambda: app.screen.title == "首页", 10, what="Home again")
            await pilot.press("m", "r", "h", "z")
            await wait_for_app(pilot, lambda: app.screen.title == "Home", 10, what="Home in English")
            assert run.running() and app.running_runs() == [run]
            assert run.record.meta().supervisor_pid == supervisor  # the same run, not a new one
    finally:
        run.stop(grace=2)


# Diagnostics in Chinese, then in English without running the doctor again: in the walk through every tab of
# Diagnostics (test_diagnostics_screen.py::test_doctor_bench_and_probe_from_the_screen_in_chinese_then_english), so that the doctor runs once for both.


async def test_textuals_own_words_are_chinese_the_palette_its_commands_a_menus_escape_and_the_icon(in_chinese):
    """ctrl+p (or the header's ⭘) opens Textual's command palette: its search line and its commands are
    said in the language in force, and so is its "No matches found"; so are a Select's "Dismiss menu" in the
    footer and the ⭘'s tooltip."""
    import re

    from textual.command import CommandPalette
    from textual.widgets import Input
    from textual.widgets._header import HeaderIcon

    app = MgTutorApp()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.pause()
        assert [icon.tooltip for icon in app.screen.query(HeaderIcon)] == ["打开命令面板"]
        await pilot.press("ctrl+p")
        palette = await wait_for_app(pilot, lambda: app.screen if isinstance(app.screen, CommandPalette) else None)
        await pilot.pause(0.3)
        assert str(palette.query_one(Input).placeholder) == "搜索命令..."
        listed = "\n".join(str(option.prompt) for option in palette.query_one("CommandList")._options)
        assert "主题" in listed and "截图" in listed and "退出" in listed, listed
        assert not re.search(r"\b(Theme|Screenshot|Quit the application|Change the current theme)\b", listed)
        await pilot.press(*"zzqx")  # a search that matches nothing: the palette says so, in Chinese
        await wait_for_app(pilot, lambda: "未找到匹配的命令" in options_of(palette), what="no matches, said")
        assert "No matches" not in options_of(palette)
        await pilot.press("escape")
    menu = MenuApp()
    async with menu.run_test(size=(80, 24)) as pilot:
        menu.query_one(Select).focus()
        await pilot.press("enter")  # the menu opens: its escape key is in the footer
        await pilot.pause()
        keys = [key.description for key in menu.screen.query(FooterKey)]
        assert "关闭菜单" in keys and "Dismiss menu" not in keys, keys


def options_of(palette) -> str:
    return "\n".join(str(option.prompt) for option in palette.query_one("CommandList")._options)


class MenuApp(App[None]):
    """A Select and the footer every mode uses."""

    def compose(self) -> ComposeResult:
        from mgtutor.tui.widgets.mode_footer import ModeFooter

        yield Select([("gloo", "gloo"), ("nccl", "nccl")], value="gloo", allow_blank=False)
        yield ModeFooter()
