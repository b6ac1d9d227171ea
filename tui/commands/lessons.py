"""`mgtutor lessons list|show|run|check|hint|reset`: the lesson path, headless."""
from __future__ import annotations

import argparse
import json
import shutil
import sys

from mgtutor.training.foundation.i18n import N_, _
from mgtutor.tui.commands.options import add_backend
from mgtutor.tui.errors import CliError

EPILOG = N_("""examples:
  mgtutor lessons                          the path, with progress marks
  mgtutor lessons list --json              the path for scripts
  mgtutor lessons show 05                  a lesson's text, its example script and exercise
  mgtutor lessons run 04-ddp-torchrun      run the lesson's steps for real and check them
  mgtutor lessons check 05                 check YOUR fixed exercise (the workspace copy)
  mgtutor lessons check 05 --solution      check the reference solution
  mgtutor lessons hint 05                  the next hint, one at a time
  mgtutor lessons reset 05                 put the broken exercise back in the workspace

check exits 0 only when every check passed, 1 when one failed, 3 when a step could not run here
(e.g. it needs GPUs).
""")


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("lessons", help=_("the guided path from one GPU to many: list, show, run, check"),
                            description=_("Lessons run for real on this machine and check what happened."),
                            epilog=_(EPILOG), formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", action="store_true", help=_("print JSON for scripts"))
    parser.set_defaults(func=main, lesson=None, solution=False, backend="auto")
    actions = parser.add_subparsers(dest="action", metavar="ACTION")
    actions.default = "list"  # `mgtutor lessons` alone lists
    for action, what in ACTIONS.items():
        _add_action(actions, action, what)


ACTIONS = {
    "list": N_("the path, with progress marks (the default)"),
    "show": N_("a lesson's text, its example script and exercise"),
    "run": N_("run the lesson's steps for real and check them"),
    "check": N_("check YOUR fixed exercise (the workspace copy)"),
    "hint": N_("the next hint, one at a time"),
    "reset": N_("put the broken exercise back in the workspace"),
}


def _add_action(actions: argparse._SubParsersAction, action: str, what: str) -> None:
    parser = actions.add_parser(action, help=_(what), description=_(what))
    if action != "list":
        parser.add_argument("lesson", nargs="?", metavar="ID", help=_("lesson id, number (5) or id prefix"))
    if action != "hint" and action != "reset":
        parser.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help=_("print JSON for scripts"))
    if action == "check":
        parser.add_argument("--solution", action="store_true", help=_("check: run the reference solution"))
    if action in ("run", "check"):
        add_backend(parser, help=N_("run/check: NCCL on GPUs, gloo on CPU processes (default: auto)"))


def main(args: argparse.Namespace) -> int:
    from mgtutor.lessons.loader import LessonError, all_lessons, get_lesson
    from mgtutor.lessons.progress import Progress

    progress = Progress()
    if args.action == "list":
        return _list(all_lessons(), progress, args.json)
    if not args.lesson:
        raise CliError(_("give a lesson id, e.g. 05-distributed-sampler (see `mgtutor lessons list`)"))
    try:
        lesson = get_lesson(args.lesson)
    except LessonError as exc:
        raise CliError(str(exc)) from None
    if args.action == "show":
        return _show(lesson, progress, args.json)
    if args.action == "hint":
        return _hint(lesson, progress)
    if args.action == "reset":
        return _reset(lesson)
    return _run_or_check(lesson, progress, args)


def _list(lessons, progress, as_json: bool) -> int:
    rows = [{"id": lesson.id, "title": lesson.title, "gpu_only": lesson.gpu_only, "example": str(lesson.example),
             "has_exercise": lesson.exercise is not None, "done": progress.done(lesson.id),
             "done_cpu": progress.done_on_cpu(lesson.id), "mark": progress.mark(lesson.id)} for lesson in lessons]
    if as_json:
        print(json.dumps(rows, indent=2))
        return 0
    done, total = progress.summary()
    print(_("The path from one GPU to many — {done}/{total} done").format(done=done, total=total) + "\n")
    for lesson, row in zip(lessons, rows):
        mark = progress.mark(lesson.id)  # the marks of the TUI's list
        here = "▸" if lesson.id == progress.current and mark == " " else mark
        tags = " ".join(t for t, on in ((_("[exercise]"), row["has_exercise"]), ("[GPU]", row["gpu_only"]),
                                        ("(CPU)", row["done_cpu"])) if on)
        print(f" {here} {lesson.number:2d}  {lesson.id:<24} {lesson.title}  {tags}".rstrip())
    print("\n" + _("✓ done  ✗ check failed  – ran with steps skipped (no GPU here)  (CPU) done without the GPU-only "
                   "steps"))
    print(_("`mgtutor lessons show ID` to read one, `mgtutor lessons run ID` to run it."))
    return 0


def _show(lesson, progress, as_json: bool) -> int:
    from mgtutor.lessons.progress import workspace_copy
    from mgtutor.training.foundation.linebreak import fit_markdown

    workspace = workspace_copy(lesson)
    if as_json:
        print(json.dumps({
            "id": lesson.id, "number": lesson.number, "title": lesson.title, "goal": lesson.goal,
            "prerequisites": list(lesson.prerequisites), "gpu_only": lesson.gpu_only, "example": str(lesson.example),
            "explanation": lesson.explanation(), "done": progress.done(lesson.id),
            "steps": [{"name": s.name, "title": s.title, "script": str(s.script), "args": list(s.args),
                       "nproc": s.nproc, "gpu_only": s.gpu_only, "checks": [c.says for c in s.checks]}
                      for s in lesson.steps],
            "exercise": None if lesson.exercise is None else {
                "task": lesson.exercise.task, "workspace": str(workspace), "hints": len(lesson.exercise.hints)},
        }, indent=2))
        return 0
    done = "  ✓ " + _("done") if progress.done(lesson.id) else ""
    print(_("Lesson {number}: {title}").format(number=lesson.number, title=lesson.title) + f"  ({lesson.id}){done}")
    width = min(shutil.get_terminal_size().columns, 100)  # Chinese lines broken as Chinese, not by the terminal
    print(fit_markdown(_("Goal: {goal}").format(goal=lesson.goal), width) + "\n")
    print(fit_markdown(lesson.explanation().rstrip(), width))
    print("\n" + _("Steps:"))
    for step in lesson.steps:
        gpu = "  " + _("[GPU only]") if step.gpu_only else ""
        command = " ".join([step.script.name, *step.args])
        print(f"  {step.name}: {step.title} — " + _("{ranks} rank(s), {command}").format(ranks=step.nproc,
                                                                                      command=command) + gpu)
        for check in step.checks:
            print("      " + _("checks: {says}").format(says=check.says))
    print("\n" + _("Example script (runs under plain torchrun): {path}").format(path=lesson.example))
    if lesson.exercise:
        print("\n" + _("Exercise: {task}").format(task=lesson.exercise.task) + "\n  "
              + _("your copy: {path}").format(path=workspace) + "\n  "
              + _("check it: {command}").format(command=f"mgtutor lessons check {lesson.id}"))
    return 0


def _hint(lesson, progress) -> int:
    if not lesson.hints:
        print(_("lesson {id} has no exercise, so no hints: run it with `mgtutor lessons run {id}`").format(id=lesson.id))
        return 0
    hint = progress.next_hint(lesson)
    if hint is None:
        print(_("All {count} hints are shown; the reference solution is {path}").format(
            count=len(lesson.hints), path=lesson.exercise.solution))
        for number, text in enumerate(lesson.hints, start=1):
            print("  " + _("hint {number}: {text}").format(number=number, text=text))
        return 0
    number, text = hint
    print(_("hint {number}/{total}: {text}").format(number=number, total=len(lesson.hints), text=text))
    return 0


def _reset(lesson) -> int:
    from mgtutor.lessons.progress import ensure_workspace

    if lesson.exercise is None:
        raise CliError(_("lesson {id} has no exercise").format(id=lesson.id))
    print(_("the broken exercise is back in {path}").format(path=ensure_workspace(lesson, reset=True)))
    return 0


STATUS_WORDS = {"passed": N_("passed"), "failed": N_("failed"), "skipped": N_("skipped")}


def print_results(results, out=sys.stdout) -> None:
    for result in results:
        head = {"passed": "✓", "failed": "✗", "skipped": "–"}[result.status]
        print(f"{head} {result.title} [{_(STATUS_WORDS[result.status])}]" + (f": {result.reason}" if result.reason
                                                                              else ""), file=out)
        for check in result.checks:
            print(f"    {check.mark} {check.says} — {check.detail}", file=out)
        for key, value in result.measures.items():
            print("    " + _("measured {key}: {value}").format(key=key, value=value), file=out)
        if result.run_path:
            print("    " + _("run record: {path}").format(path=result.run_path), file=out)


def _run_or_check(lesson, progress, args: argparse.Namespace) -> int:
    from mgtutor.lessons.progress import ensure_workspace
    from mgtutor.lessons.runner import check_lesson, overall, run_lesson
    from mgtutor.training.runs.launch.launcher import LaunchError

    out = sys.stderr if args.json else sys.stdout

    def on_line(rank, _stream, line):
        print(f"{'[torchrun]' if rank is None else f'[rank {rank}]'} {line}", file=out, flush=True)

    if args.action == "check" and lesson.exercise and not args.solution:
        print(_("checking your copy: {path}").format(path=ensure_workspace(lesson)), file=out, flush=True)
    progress.set_current(lesson.id)
    try:
        if args.action == "run":
            results = run_lesson(lesson, args.backend, on_line, progress)
        else:
            results = check_lesson(lesson, args.solution, args.backend, on_line, progress)
    except LaunchError as exc:
        raise CliError(str(exc)) from None
    status = overall(results)
    if args.json:
        print(json.dumps({"lesson": lesson.id, "status": status, "steps": [r.to_json() for r in results]}, indent=2))
    else:
        print("", file=out)
        print_results(results, out)
        if status == "passed" and lesson.exercise and args.action == "check" and not args.solution:
            print("\n" + _("lesson {id} done ✓").format(id=lesson.id))
        elif status == "failed" and lesson.hints and args.action == "check":
            print("\n" + _("stuck? `mgtutor lessons hint {id}` gives one hint at a time").format(id=lesson.id))
    return {"passed": 0, "failed": 1, "skipped": 3}[status]
