"""A worker thread's result that lands after the app began to quit, or after its screen was closed, is dropped: the
app quits, or goes on, cleanly. (Seen in CI: `d` then quitting while the doctor's torch child was still answering
failed the app with NoMatches('#doctor-status').) What the user must still hear of, a fix written into their script,
is said all the same."""
from __future__ import annotations

import threading

from textual.app import App, ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from mgtutor.diagnostics.doctor import versions
from mgtutor.tui.app import MgTutorApp
from mgtutor.tui.screens.diagnostics import DiagnosticsScreen
from mgtutor.tui.screens.from_thread import call_on_screen
from tests.helpers import CPU_TORCH_FACTS


async def test_the_doctors_answer_after_quit_began_is_dropped_and_the_app_quits_cleanly(monkeypatch):
    answer, delivered = threading.Event(), threading.Event()

    def gather(*args, **kwargs) -> dict:  # torch's child, stood in: it answers once the app is quitting
        answer.wait(30)
        return dict(CPU_TORCH_FACTS)

    async def on_unmount(self) -> None:  # the screen's widgets are gone by now, the app still running
        answer.set()
        for worker in list(self.workers):
            if worker.group == "doctor":
                await worker.wait()  # its result reaches the loop meanwhile
        delivered.set()

    monkeypatch.setattr(versions, "gather", gather)
    monkeypatch.setattr(DiagnosticsScreen, "on_unmount", on_unmount, raising=False)
    app = MgTutorApp()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("d")
        await pilot.pause()
        assert isinstance(app.screen, DiagnosticsScreen) and "doctor" in app.screen.busy
    assert delivered.is_set() and app.return_code in (None, 0)


class Holder(App):
    def compose(self) -> ComposeResult:
        with Vertical(id="box"):
            yield Static("first", id="line")


async def test_a_result_for_a_removed_widget_is_dropped_and_one_for_a_shown_widget_arrives():
    app = Holder()
    async with app.run_test():
        box, calls = app.query_one("#box", Vertical), []

        def show() -> None:
            calls.append(str(box.query_one("#line", Static).render()))

        async def deliver() -> None:  # from a thread worker, as the screens do
            await app.run_worker(lambda: call_on_screen(box, show), thread=True).wait()

        await deliver()
        assert calls == ["first"]
        await box.remove()
        await deliver()
        assert calls == ["first"]  # not called: its widgets are gone with it


class Base(App):
    pass


async def test_fixes_written_after_their_diff_was_closed_are_still_said_and_the_app_goes_on(tmp_path, monkeypatch):
    """The writing thread ends after the user closed the diff (escape): the file is written, the app says so and
    goes on; only closing the already closed diff is left out."""
    from mgtutor.diagnostics.check.fix.apply import fix_file, write_text
    from mgtutor.tui.screens import patch
    from mgtutor.tui.screens.confirm import ConfirmScreen
    from mgtutor.tui.screens.patch import PatchScreen
    from tests.helpers import wait_for_app
    from tests.test_check_patch_tui import SCRIPT

    script = tmp_path / "demo.py"
    script.write_text(SCRIPT.read_text())
    report, go_on = fix_file(script), threading.Event()

    def slow_write(*args, **kwargs):  # a slow disk, stood in
        go_on.wait(30)
        return write_text(*args, **kwargs)

    monkeypatch.setattr(patch, "write_text", slow_write)
    app = Base()
    async with app.run_test() as pilot:
        closed: list[bool | None] = []
        app.push_screen(PatchScreen(report), closed.append)
        await pilot.press("a")
        await wait_for_app(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")  # the writing thread starts and waits
        await wait_for_app(pilot, lambda: isinstance(app.screen, PatchScreen))
        await pilot.press("escape")
        await wait_for_app(pilot, lambda: not isinstance(app.screen, PatchScreen))
        go_on.set()
        await wait_for_app(pilot, lambda: script.read_text() == report.after, what="the fix written")
        said = lambda: " ".join(str(n.message) for n in app._notifications)  # noqa: E731
        await wait_for_app(pilot, lambda: "1 fix(es) written" in said(), what="the notice")
        assert closed == [False]  # closed once, by the user's escape
    assert app.return_code in (None, 0)
