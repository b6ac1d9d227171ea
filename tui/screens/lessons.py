"""Lessons mode: the path with progress marks, the lesson text, its code, a run pane with every
rank's output, the checks (✓/✗ with what was measured), hints one at a time (first those for the
check that failed), and the exercise edited in $EDITOR while the app is suspended. `[` and `]` go
through the tabs."""
from __future__ import annotations

import os
import shlex
import subprocess
import time
from collections import deque
from pathlib import Path

from rich.syntax import Syntax
from rich.text import Text
from textual import work
from textual.app import ComposeResult, SuspendNotSupported
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import Header, ListItem, ListView, Markdown, RichLog, Static, TabbedContent, TabPane

from mgtutor.lessons.loader import Lesson, Step, all_lessons
from mgtutor.lessons.progress import Progress, ensure_workspace, failed_check_hints, workspace_copy
from mgtutor.lessons.runner import StepResult, finish_step, follow, gpu_count, overall, skip_reason, start_step, summarize
from mgtutor.training.foundation.i18n import N_, _, current_language
from mgtutor.training.runs.launch.launcher import LaunchError, said_device_note
from mgtutor.tui.messages import RunStarted, ShowLesson
from mgtutor.tui.screens.from_thread import call_on_screen
from mgtutor.tui.widgets.mode_footer import ModeFooter, say_title
from mgtutor.tui.widgets.lesson_text import (checks_text, exercise_text, lesson_label, lesson_mark, lesson_markdown,
                                             status_text)
from mgtutor.tui.widgets.rank_logs import neutralise, prefix


class LessonsScreen(Screen):
    TITLE = N_("Lessons")
    BINDINGS = [
        Binding("g", "run_steps", N_("Run"), tooltip=N_("run the lesson's steps for real and check them")),
        Binding("e", "edit", N_("Edit"), tooltip=N_("edit the exercise in $EDITOR")),
        Binding("c", "check", N_("Check"), tooltip=N_("check your exercise (or the steps)")),
        Binding("i", "hint", N_("Hint"), tooltip=N_("the next hint, first the one for the check that failed")),
        Binding("n", "next_lesson", N_("Next"), tooltip=N_("next lesson")),
        Binding("p", "previous_lesson", N_("Prev"), tooltip=N_("previous lesson")),
        Binding("right_square_bracket", "next_tab", N_("Tab"), key_display="]",
                tooltip=N_("the next tab: Lesson, Code, Exercise, Run, Checks")),
        Binding("left_square_bracket", "previous_tab", N_("Previous tab"), key_display="[", show=False),
        Binding("x", "reset_exercise", N_("Reset exercise"), show=False),
    ]
    TABS = {"tab-text": N_("Lesson"), "tab-code": N_("Code"), "tab-exercise": N_("Exercise"), "tab-run": N_("Run"),
            "tab-checks": N_("Checks")}
    NOTHING_CHECKED = N_("Nothing checked yet: g runs the lesson's steps, c checks.")

    def __init__(self) -> None:
        super().__init__()
        self.lessons = list(all_lessons())
        self.language = current_language()  # the lessons' words are loaded in it
        self.progress = Progress()
        self.lesson: Lesson = next(lesson for lesson in self.lessons if lesson.id == self.progress.current)
        self.busy = False
        self._pending: deque[str] = deque()  # rank lines from the worker thread, drained on a timer
        self._marks_shown: dict[str, tuple[Text, Text]] = {}
        self._text_wanted: Lesson | None = None  # the lesson whose text the pane should show
        self._text_shown: Lesson | None = None  # the lesson whose text the pane holds
        self._text_building = False

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal(id="lessons-body"):
            self._marks_shown = {lesson.id: (lesson_mark(lesson, self.progress), lesson_label(lesson, self.progress))
                                 for lesson in self.lessons}
            yield ListView(*[ListItem(Horizontal(Static(self._marks_shown[lesson.id][0], classes="lesson-mark"),
                                                 Static(self._marks_shown[lesson.id][1], classes="lesson-title"),
                                                 classes="lesson-item"),
                                      id=f"item-{lesson.id}") for lesson in self.lessons], id="lesson-list",
                           initial_index=self.lessons.index(self.lesson))
            with Vertical(id="lesson-main"):
                yield Static("", id="lesson-status")
                with TabbedContent(id="lesson-tabs"):
                    with TabPane(_(self.TABS["tab-text"]), id="tab-text"):
                        with VerticalScroll(id="lesson-text"):
                            yield Static("", id="lesson-loading")
                            yield Markdown("", id="lesson-markdown")
                    with TabPane(_(self.TABS["tab-code"]), id="tab-code"):
                        with VerticalScroll():
                            yield Static("", id="lesson-code")
                    with TabPane(_(self.TABS["tab-exercise"]), id="tab-exercise"):
                        with VerticalScroll():
                            yield Static("", id="lesson-exercise")
                    with TabPane(_(self.TABS["tab-run"]), id="tab-run"):
                        # min_width: RichLog wraps at 78 columns at least, wider than this pane at 80×24
                        yield RichLog(id="lesson-log", max_lines=2000, wrap=True, markup=False, auto_scroll=True,
                                      min_width=20)
                    with TabPane(_(self.TABS["tab-checks"]), id="tab-checks"):
                        with VerticalScroll():
                            yield Static(_(self.NOTHING_CHECKED), id="lesson-checks")
        yield ModeFooter()

    def on_mount(self) -> None:
        self.set_interval(0.1, self._drain_lines)
        self.query_one("#lesson-list", ListView).focus()
        self.show_lesson(self.lesson)

    def on_screen_resume(self) -> None:
        """Progress may have moved on elsewhere (`mgtutor lessons check` in another terminal), and the
        language may have changed on Home: the lessons are then loaded again in it."""
        if not self.busy and self.language != current_language():
            self.retranslate()
        if not self.busy:
            self.progress = Progress()
            self._refresh_marks()
            self._show_status()

    def retranslate(self) -> None:
        """The words in the language in force, with the same lesson shown: no restart, no run lost."""
        self.language = current_language()
        self.lessons = list(all_lessons())
        lesson = next(lesson for lesson in self.lessons if lesson.id == self.lesson.id)
        tabs = self.query_one("#lesson-tabs", TabbedContent)
        for pane_id, label in self.TABS.items():
            tabs.get_tab(pane_id).label = _(label)
        say_title(self)
        self.lesson = lesson
        self.show_lesson(lesson)

    def on_show_lesson(self, message: ShowLesson) -> None:
        """Another mode asked for a lesson (a failure's fix card links to the lesson that teaches it)."""
        match = [i for i, lesson in enumerate(self.lessons) if lesson.id == message.lesson_id]
        if match and not self.busy:
            self._move(match[0] - self.lessons.index(self.lesson))

    # -- showing a lesson ------------------------------------------------------------------
    def on_list_view_highlighted(self, event: ListView.Highlighted) -> None:
        if event.item is not None and event.item.id:
            lesson = next(lesson for lesson in self.lessons if f"item-{lesson.id}" == event.item.id)
            if lesson is not self.lesson:
                self.show_lesson(lesson)

    def show_lesson(self, lesson: Lesson) -> None:
        if lesson is not self.lesson and not self.busy:
            self.query_one("#lesson-log", RichLog).clear()  # the previous lesson's output is not this one's
        self.lesson = lesson
        self.progress.set_current(lesson.id)
        self._show_text(lesson)
        self.query_one("#lesson-code", Static).update(  # wrapped in the pane: nothing cut at 80 columns
            Syntax(lesson.example.read_text(), "python", line_numbers=True, word_wrap=True))
        self._show_exercise()
        self._show_status()
        saved = self.progress.lesson(lesson.id).get("checked")
        self.query_one("#lesson-checks", Static).update(checks_text(saved, lesson) if saved else
                                                        _(self.NOTHING_CHECKED))

    def _show_text(self, lesson: Lesson) -> None:
        """A long lesson takes a while to lay out: until its text is built the pane names the lesson that
        comes, never shows the last one's words under this one's title."""
        self._text_wanted = lesson
        if self._text_shown is lesson:
            return
        self.query_one("#lesson-markdown", Markdown).display = False
        loading = self.query_one("#lesson-loading", Static)
        loading.update(_("Lesson {number} of {total}: {title}…").format(number=lesson.number, total=len(self.lessons),
                                                                        title=lesson.title))
        loading.display = True
        if not self._text_building:
            self._text_building = True
            self.run_worker(self._build_text(), group="lesson-text")

    async def _build_text(self) -> None:
        """Build the wanted lesson's text; lessons passed over meanwhile (n n n) are never built."""
        markdown = self.query_one("#lesson-markdown", Markdown)
        loading, pane = self.query_one("#lesson-loading", Static), self.query_one("#lesson-text", VerticalScroll)
        try:  # (the widgets are held: the app may close while a text is built)
            while (lesson := self._text_wanted) is not None and lesson is not self._text_shown:
                await markdown.update(lesson_markdown(lesson, len(self.lessons)))
                self._text_shown = lesson
        finally:
            self._text_building = False
        loading.display = False
        markdown.display = True
        pane.scroll_home(animate=False)

    def _show_status(self, note: str = "") -> None:
        self.query_one("#lesson-status", Static).update(status_text(self.lesson, self.progress, note))

    def _show_exercise(self) -> None:
        lesson = self.lesson
        hints = [(number, lesson.hints[number - 1]) for number in self.progress.hints_seen(lesson.id)
                 if number <= len(lesson.hints)]
        copy = workspace_copy(lesson)
        code = copy.read_text() if copy is not None and copy.exists() else None
        self.query_one("#lesson-exercise", Static).update(exercise_text(lesson, hints, copy, code))

    def _refresh_marks(self) -> None:
        """Only the marks that changed are drawn again: each update lays the list out anew."""
        for lesson in self.lessons:
            marks = (lesson_mark(lesson, self.progress), lesson_label(lesson, self.progress))
            if self._marks_shown.get(lesson.id) == marks:
                continue
            self._marks_shown[lesson.id] = marks
            item = self.query_one(f"#item-{lesson.id}", ListItem)
            item.query_one(".lesson-mark", Static).update(marks[0])
            item.query_one(".lesson-title", Static).update(marks[1])

    # -- actions ---------------------------------------------------------------------------
    def action_next_lesson(self) -> None:
        self._move(1)

    def action_previous_lesson(self) -> None:
        self._move(-1)

    def _move(self, delta: int) -> None:
        index = max(0, min(len(self.lessons) - 1, self.lessons.index(self.lesson) + delta))
        self.query_one("#lesson-list", ListView).index = index
        self.show_lesson(self.lessons[index])

    def action_hint(self) -> None:
        if not self.lesson.hints:
            self.notify(_("This lesson has no exercise, so no hints: g runs its steps."))
            return
        hint = self.progress.next_hint(self.lesson)
        failed = dict(failed_check_hints(self.lesson, self.progress.lesson(self.lesson.id).get("checked")))
        if hint is None and self.lesson.exercise is not None:
            self.notify(_("All hints shown; the reference solution is {name}").format(
                name=self.lesson.exercise.solution.name))
        elif hint is None:
            self.notify(_("All hints shown."))
        else:
            number, words = hint
            said = _("Hint {number}/{total}: ").format(number=number, total=len(self.lesson.hints))
            if number in failed:
                said = _("Hint {number}/{total}, for the check that failed ({check}): ").format(
                    number=number, total=len(self.lesson.hints), check=failed[number])
            self.notify(said + words, timeout=15)
        self._show_exercise()
        self.query_one("#lesson-tabs", TabbedContent).active = "tab-exercise"

    def action_edit(self) -> None:
        if self.lesson.exercise is None:
            self.notify(_("This lesson has no exercise to edit."))
            return
        path = ensure_workspace(self.lesson)
        editor = shlex.split(os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi")
        try:
            with self.app.suspend():
                subprocess.run([*editor, str(path)], check=False)
        except SuspendNotSupported:
            self.notify(_("Edit {path} in your editor, then press c to check it.").format(path=path), timeout=15)
        except FileNotFoundError:
            self.notify(_("Editor {editor} not found: set $EDITOR, or edit {path} yourself.").format(
                editor=repr(editor[0]), path=path), severity="error")
        self._show_exercise()
        self.query_one("#lesson-tabs", TabbedContent).active = "tab-exercise"

    def action_next_tab(self) -> None:
        self._step_tab(1)

    def action_previous_tab(self) -> None:
        self._step_tab(-1)

    def _step_tab(self, step: int) -> None:
        tabs = self.query_one("#lesson-tabs", TabbedContent)
        order = list(self.TABS)
        tabs.active = order[(order.index(tabs.active) + step) % len(order)] if tabs.active in order else order[0]

    def action_reset_exercise(self) -> None:
        if self.lesson.exercise is not None:
            ensure_workspace(self.lesson, reset=True)
            self._show_exercise()
            self.notify(_("The broken exercise is back in the workspace."))

    def action_run_steps(self) -> None:
        self._start("run")

    def action_check(self) -> None:
        self._start("check")

    def _start(self, mode: str) -> None:
        if self.busy:
            self.notify(_("A lesson run is still going; wait for it (its output is in the Run tab)."))
            return
        self.busy = True
        log = self.query_one("#lesson-log", RichLog)
        log.clear()
        self.query_one("#lesson-tabs", TabbedContent).active = "tab-run"
        what = _("checking your exercise") if mode == "check" and self.lesson.exercise else _("running the steps")
        self._show_status(f"... {what}")
        self.run_lesson(self.lesson, mode)

    # -- the run, in a thread ---------------------------------------------------------------
    @work(thread=True, exclusive=True, group="lesson-run")
    def run_lesson(self, lesson: Lesson, mode: str) -> None:
        gpus = gpu_count()
        jobs: list[tuple[Step, Path | None]]
        if mode == "check" and lesson.exercise:
            jobs = [(lesson.exercise.step, ensure_workspace(lesson))]
        else:
            jobs = [(step, None) for step in lesson.steps]
        results: list[StepResult] = []
        for step, script in jobs:
            reason = skip_reason(step, gpus=gpus)
            if reason:
                self._pending.append(f"── {step.title}: " + _("skipped — {reason}").format(reason=reason))
                results.append(StepResult(lesson.id, step.name, step.title, str(script or step.script),
                                          "skipped", reason=reason))
                continue
            try:
                run = start_step(lesson, step, script, gpus=gpus)
            except LaunchError as exc:
                results.append(StepResult(lesson.id, step.name, step.title, str(script or step.script),
                                          "failed", reason=str(exc)))
                continue
            self.post_message(RunStarted(run))
            meta = run.record.meta()
            self._pending.append(f"── {step.title}: " + _("{ranks} rank(s), {backend} — {device}").format(
                ranks=meta.world_size, backend=meta.backend, device=said_device_note(meta)))
            stopped = follow(run, step.timeout_s,
                             lambda rank, _s, line: self._pending.append(prefix(rank) + neutralise(line)))
            results.append(finish_step(lesson, step, run, script, stopped))
        call_on_screen(self, self._finished, lesson, mode, results)

    def _drain_lines(self) -> None:
        if not self._pending:
            return
        batch: list[str] = []
        while self._pending and len(batch) < 500:
            batch.append(self._pending.popleft())
        log = self.query_one("#lesson-log", RichLog)
        for line in batch:  # wrapped at the pane's width: nothing is cut at 80 columns
            log.write(Text(line))

    def _finished(self, lesson: Lesson, mode: str, results: list[StepResult]) -> None:
        self.busy = False
        self._drain_lines()
        status = overall(results)
        for result in results:
            self.progress.record_step(lesson.id, result.step, result.status, result.run_id)
        if not (mode == "run" and lesson.exercise):
            self.progress.record_check(lesson.id, status, summarize(results))
        saved = {"status": status, "t": time.time(), "checks": summarize(results)}
        self._refresh_marks()
        if lesson is self.lesson:
            self.query_one("#lesson-checks", Static).update(checks_text(saved, lesson))
            self.query_one("#lesson-tabs", TabbedContent).active = "tab-checks"
            self._show_status(self.finished_note(lesson, mode, status))

    def finished_note(self, lesson: Lesson, mode: str, status: str) -> str:
        """What the run or check means for the lesson: a lesson with an exercise is done only when the
        exercise passes, so its steps passing (g) is not the end of it."""
        exercise_left = mode == "run" and lesson.exercise is not None and not self.progress.done(lesson.id)
        if exercise_left and status == "passed":
            return "✓ " + _("the steps passed — the lesson is done when its exercise passes: e edits it, c checks it")
        if exercise_left and status == "skipped":
            return "– " + _("some steps could not run here: see Checks. The exercise remains: e edits it, c checks it")
        if status == "skipped" and self.progress.done_on_cpu(lesson.id):
            return "✓ " + _("done on CPU: every step that runs here passed (the GPU-only ones were skipped)")
        last = lesson.id == self.lessons[-1].id
        return {"passed": "✓ " + _("all checks passed") + ("" if last else "  — " + _("n for the next lesson")),
                "failed": "✗ " + _("a check failed: see Checks") + ("  " + _("(i for a hint)") if lesson.hints else ""),
                "skipped": "– " + _("some steps could not run here: see Checks")}[status]
