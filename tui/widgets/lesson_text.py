"""Text for Lessons mode: list labels with progress marks, check results, the exercise pane.

Built as rich Text (never markup strings): check details quote rank output such as "[rank 1]",
which markup would swallow as a tag.
"""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Group, RenderableType
from rich.syntax import Syntax
from rich.text import Text

from mgtutor.lessons.loader import Lesson
from mgtutor.lessons.progress import Progress
from mgtutor.training.foundation.i18n import N_, _
from mgtutor.training.foundation.said import say_kept

MARK_STYLES = {"✓": "bold green", "✗": "bold red", "–": "yellow", "▸": "bold cyan", " ": ""}
STATUS_WORDS = {"passed": N_("passed"), "failed": N_("failed"), "skipped": N_("skipped")}


def lesson_mark(lesson: Lesson, progress: Progress) -> Text:
    """The mark and number column of the list: "✓ 12"."""
    mark = progress.mark(lesson.id)
    return Text.assemble((mark, MARK_STYLES[mark]), f" {lesson.number:2d}")


def lesson_label(lesson: Lesson, progress: Progress) -> Text:
    """The title column of the list (it wraps under itself, beside the mark column)."""
    text = Text(lesson.title)
    if lesson.exercise:
        text.append(" ✎", style="cyan")
    if progress.done_on_cpu(lesson.id):
        text.append(" (CPU)", style="yellow")
    elif lesson.gpu_only:
        text.append(" GPU", style="dim")
    return text


def status_text(lesson: Lesson, progress: Progress, note: str = "") -> Text:
    text = Text()
    text.append(f"{lesson.number:02d} {lesson.title}", style="bold")
    if progress.done(lesson.id):
        text.append("  ✓ " + _("done") + (_(" (CPU: the GPU steps were skipped)") if progress.done_on_cpu(lesson.id)
                                           else ""), style=MARK_STYLES["✓"])
    if lesson.gpu_only:
        text.append("  " + _("[GPU only]"), style="yellow")
    done, total = progress.summary()
    keys = _("g run · e edit · c check · i hint") if lesson.exercise else _("g run the steps · c check")
    text.append("\n" + _("{done}/{total} lessons done · {keys} · n/p next/previous").format(
        done=done, total=total, keys=keys), style="dim")
    if note:
        text.append(f"\n{note}", style="bold")
    return text


def lesson_markdown(lesson: Lesson, total: int) -> str:
    """The lesson text, then what its steps run and check, then where to go further."""
    parts = [_("*Lesson {number} of {total} — goal:* {goal}").format(number=lesson.number, total=total,
                                                                     goal=lesson.goal),
             "", lesson.explanation().rstrip(), "", _("## Steps (g runs them)"), ""]
    for step in lesson.steps:
        where = (_("GPU only, needs {gpus} GPU(s)").format(gpus=max(step.min_gpus, 1)) if step.gpu_only
                 else _("runs on CPU or GPUs"))
        needs = _(", needs {packages}").format(packages="`" + "`, `".join(step.requires) + "`") if step.requires else ""
        command = "`" + " ".join([step.script.name, *step.args]) + "`"
        parts.append(f"- **{step.title}** — " + _("{command} on {ranks} rank(s), {where}").format(
            command=command, ranks=step.nproc, where=where) + needs)
        parts.extend("    - " + _("checks: {says}").format(says=check.says) for check in step.checks)
    if lesson.exercise:
        parts += ["", _("## Exercise (e edit · c check · i hint)"), "", lesson.exercise.task]
    if lesson.see_also:
        parts += ["", _("## Further"), ""] + [f"- `{command}`" for command in lesson.see_also]
    return "\n".join(parts) + "\n"


def check_mark(passed: bool | None) -> str:
    return "✓" if passed else ("–" if passed is None else "✗")


def checks_text(saved: dict[str, Any], lesson: Lesson | None = None) -> Text:
    """A saved check record ({status, checks: [{step, title, status, reason, checks: [...]}]}) as lines,
    in the language in force: the record keeps its words as message ids with their arguments. A step is
    named by its title (a record kept before titles were: the lesson's title of that step)."""
    text = Text()
    status = saved.get("status", "?")
    mark = {"passed": "✓", "failed": "✗"}.get(status, "–")
    text.append(f"{mark} {_(STATUS_WORDS.get(status, status))}\n\n", style=MARK_STYLES[mark])
    for step in saved.get("checks", []):
        step_mark = {"passed": "✓", "failed": "✗"}.get(step.get("status"), "–")
        text.append(f"{step_mark} ", style=MARK_STYLES[step_mark])
        title = say_kept(step.get("title")) or step_title(lesson, step.get("step"))
        text.append(f"{title} [{_(STATUS_WORDS.get(step.get('status') or '?', '?'))}]", style="bold")
        if step.get("reason"):
            text.append(_(": ") + say_kept(step["reason"]), style="yellow")
        text.append("\n")
        for check in step.get("checks", []):
            mark = check_mark(check.get("passed"))
            text.append(f"    {mark} ", style=MARK_STYLES[mark])
            text.append(say_kept(check.get("says")))
            text.append(f"\n        {say_kept(check.get('detail'))}\n", style="dim")
    return text


def step_title(lesson: Lesson | None, name: Any) -> str:
    """The title of the lesson's step (or exercise) called `name`; the name itself when there is none."""
    steps = [*lesson.steps, *([lesson.exercise.step] if lesson.exercise else [])] if lesson else []
    return next((step.title for step in steps if step.name == name), str(name or "?"))


def exercise_text(lesson: Lesson, hints: Sequence[tuple[int, str] | str], copy: Path | None,
                  code: str | None) -> RenderableType:
    """The task, the copy, the hints shown so far ((number, text), or texts numbered from 1) and the code,
    wrapped in the pane: nothing is cut at 80 columns."""
    if lesson.exercise is None:
        return Text(_("This lesson has no exercise: press g to run its steps and see the checks."))
    head = Text()
    head.append(_("Your task") + "\n", style="bold")
    head.append(lesson.exercise.task + "\n\n")
    head.append(_("Your copy: {path}").format(path=copy) + "\n", style="cyan")
    head.append(_("e opens it in $EDITOR · c runs it and checks what it did · i shows the next hint · "
                  "x puts the broken version back") + "\n\n", style="dim")
    for number, hint in (h if isinstance(h, tuple) else (i, h) for i, h in enumerate(hints, start=1)):
        head.append(_("Hint {number}/{total}: ").format(number=number, total=len(lesson.hints)), style="bold yellow")
        head.append(hint + "\n")
    if hints:
        head.append("\n")
    if code is None:
        head.append(_("(the copy is made when you first edit or check it)"), style="dim")
        return head
    return Group(head, Syntax(code, "python", line_numbers=True, word_wrap=True))
