"""Lessons without launching anything: the data loads, the checks judge outcomes, progress persists,
and the CLI keeps its contract."""
from __future__ import annotations

import ast
import importlib.util
import json
import subprocess

import pytest

from mgtutor.lessons.checks import Outcome, evaluate, parse_reports
from mgtutor.lessons.loader import PATH, Check, LessonError, all_lessons, get_lesson
from mgtutor.lessons.progress import Progress, ensure_workspace, workspace_dir
from mgtutor.lessons.runner import overall, skip_reason, step_spec
from mgtutor.training.runs.records.record import RunResult
from tests.conftest import mgtutor_argv, no_gpu_env

FIXED_IDS = ["01-check-gpus", "02-single-gpu-baseline", "03-dataparallel", "04-ddp-torchrun",
             "05-distributed-sampler", "06-rank0-checkpoints", "07-accelerate", "08-batch-lr-scaling",
             "09-data-loading", "10-mixed-precision", "11-torch-compile", "12-watching-a-run",
             "13-nccl-topology", "14-when-it-goes-wrong", "15-multi-node", "16-fsdp"]


def test_the_path_has_the_sixteen_fixed_ids_in_order():
    assert list(PATH) == FIXED_IDS
    assert [lesson.id for lesson in all_lessons()] == FIXED_IDS


@pytest.mark.parametrize("lesson", all_lessons(), ids=lambda lesson: lesson.id)
def test_every_lesson_is_complete(lesson):
    assert lesson.title and lesson.goal and len(lesson.explanation()) > 500
    assert lesson.example.is_file()
    assert lesson.steps, "a lesson runs something"
    for step in lesson.steps:
        assert any(c.kind in ("exit_ok", "run_fails") for c in step.checks), f"{step.name} never checks the exit"
    if lesson.exercise:
        assert lesson.exercise.broken.read_text() != lesson.exercise.solution.read_text()
        assert len(lesson.exercise.hints) >= 2
    for prerequisite in lesson.prerequisites:
        assert PATH.index(prerequisite) < PATH.index(lesson.id)


def imported_modules(path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield node.module


@pytest.mark.parametrize("lesson", all_lessons(), ids=lambda lesson: lesson.id)
def test_lesson_scripts_stand_alone(lesson):
    """The scripts are for plain torchrun: nothing from mgtutor, and each one is a __main__ script."""
    for script in lesson.scripts():
        modules = list(imported_modules(script))
        assert not [m for m in modules if m.split(".")[0] == "mgtutor"], script
        assert 'if __name__ == "__main__":' in script.read_text(), script



def dist_call(node, name) -> bool:
    return (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Attribute) and node.value.func.attr == name)


@pytest.mark.parametrize("lesson", all_lessons(), ids=lambda lesson: lesson.id)
def test_distributed_scripts_tear_down_cleanly(lesson):
    """A script that starts a process group destroys it in a `finally`, and the `try` ends with a
    barrier: a rank that tears down while a peer still communicates can make that peer abort."""
    for script in lesson.scripts():
        if script.suffix != ".py":
            continue
        tree = ast.parse(script.read_text())
        inits = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                 and n.func.attr == "init_process_group"]
        if not inits:
            continue
        guarded = [n for n in ast.walk(tree) if isinstance(n, ast.Try)
                   and any(dist_call(s, "destroy_process_group") or isinstance(s, ast.If)  # `if dist.is_initialized():`
                           and any(dist_call(b, "destroy_process_group") for b in s.body) for s in n.finalbody)]
        assert len(guarded) == 1, f"{script.name}: destroy_process_group belongs in one finally"
        assert dist_call(guarded[0].body[-1], "barrier"), f"{script.name}: the try must end with a barrier"

def test_get_lesson_by_number_prefix_and_bad_id():
    assert get_lesson("5").id == "05-distributed-sampler"
    assert get_lesson("16-f").id == "16-fsdp"
    with pytest.raises(LessonError, match="mgtutor lessons list"):
        get_lesson("99")


def outcome(reports, status="finished", first_failure=None, stderr=None):
    world = len(reports)
    ranks = [{"rank": r, "outcome": "ok" if status == "finished" else "failed"} for r in range(world)]
    result = RunResult.from_json({"status": status, "ranks": ranks, "first_failure": first_failure,
                                  "duration_s": 1.0})  # result.json's documented shape, read as the runner does
    return Outcome(result=result, world_size=world, reports=reports, stderr=stderr or {})


def run_check(kind, o, **params):
    [result] = evaluate((Check(kind, "says", params),), o)
    return result


def test_disjoint_passes_on_shards_and_says_why_it_fails_on_copies():
    shards = outcome({0: [{"epoch": 0, "indices": [0, 2]}, {"epoch": 0, "dataset_size": 4}],
                      1: [{"epoch": 0, "indices": [1, 3]}]})
    assert run_check("disjoint", shards, key="indices", where={"epoch": 0}, cover="dataset_size").passed
    same = outcome({0: [{"epoch": 0, "indices": [0, 1, 2, 3]}], 1: [{"epoch": 0, "indices": [3, 2, 1, 0]}]})
    result = run_check("disjoint", same, key="indices", where={"epoch": 0})
    assert not result.passed and "both saw 4 of the same samples" in result.detail
    partial = outcome({0: [{"indices": [0]}, {"dataset_size": 4}], 1: [{"indices": [1]}]})
    assert "saw 2 of 4" in run_check("disjoint", partial, key="indices", cover="dataset_size").detail


def test_changes_between_epochs():
    o = outcome({0: [{"epoch": 0, "indices": [1, 2]}, {"epoch": 1, "indices": [1, 2]}]})
    result = run_check("changes_between", o, key="indices", field="epoch", a=0, b=1)
    assert not result.passed and "same indices" in result.detail
    o.reports[0][1]["indices"] = [2, 1]
    assert run_check("changes_between", o, key="indices", field="epoch", a=0, b=1).passed


def test_only_rank_equal_all_true_and_value_range():
    o = outcome({0: [{"saved": "x", "checksum": 1.0, "ok": True, "lr": 0.2}],
                 1: [{"checksum": 1.0000001, "ok": True}]})
    assert run_check("only_rank", o, key="saved", rank=0).passed
    o.reports[1].append({"saved": "x"})
    assert "ranks [0, 1]" in run_check("only_rank", o, key="saved", rank=0).detail
    assert run_check("equal_across_ranks", o, key="checksum", tol=1e-6).passed
    assert not run_check("equal_across_ranks", o, key="checksum", tol=0).passed
    assert run_check("all_true", o, key="ok").passed
    o.reports[1].append({"ok": False})
    assert not run_check("all_true", o, key="ok").passed
    assert run_check("value_range", o, key="lr", min=0.1999, max=0.2001).passed
    assert "above" in run_check("value_range", o, key="lr", max=0.1).detail
    assert not run_check("value_range", o, key="missing", min=0).passed


def test_exit_and_expected_failure():
    crashed = outcome({0: [], 1: []}, status="failed", first_failure={"rank": 1, "exit_code": 1, "signal": None},
                      stderr={1: "Traceback\nRuntimeError: boom\n"})
    exit_ok = run_check("exit_ok", crashed)
    assert not exit_ok.passed and "rank 1" in exit_ok.detail and "RuntimeError: boom" in exit_ok.detail
    assert run_check("run_fails", crashed, rank=1).passed
    assert not run_check("run_fails", crashed, rank=0).passed
    assert not run_check("run_fails", outcome({0: []}), rank=0).passed
    hung = outcome({0: [], 1: []}, status="stopped")
    assert "hang" in run_check("exit_ok", hung).detail
    assert run_check("exit_ok", outcome({0: []})).passed


def test_reports_are_parsed_from_plain_output():
    text = 'hello\nREPORT {"a": 1}\nREPORT not json\nREPORTS {"b": 2}\nREPORT [1]\n'
    assert parse_reports(text) == [{"a": 1}]


def test_gpu_only_and_missing_package_steps_say_why_they_skip():
    lesson = get_lesson("03")
    assert "needs 2 NVIDIA GPU(s)" in skip_reason(lesson.steps[0], gpus=0)
    assert skip_reason(lesson.steps[0], gpus=2) is None
    assert "gloo" in skip_reason(lesson.steps[0], backend="gloo", gpus=2)
    accelerate = get_lesson("07").steps[0]
    reason = skip_reason(accelerate, gpus=0)
    if importlib.util.find_spec("accelerate") is not None:  # (importing it would start processes)
        assert reason is None
    else:
        assert reason.startswith("needs the accelerate package")
    assert overall([]) == "skipped"


def test_a_step_with_more_ranks_than_gpus_runs_cpu_ranks_that_see_no_gpu():
    lesson = get_lesson("07")
    two_ranks = lesson.steps[0]
    assert two_ranks.nproc == 2
    on_one_gpu = step_spec(lesson, two_ranks, None, "auto", gpus=1)
    assert on_one_gpu.backend == "gloo" and on_one_gpu.env["CUDA_VISIBLE_DEVICES"] == ""
    on_two = step_spec(lesson, two_ranks, None, "auto", gpus=2)
    assert on_two.backend == "nccl" and "CUDA_VISIBLE_DEVICES" not in on_two.env
    one_rank = get_lesson("02")
    assert step_spec(one_rank, one_rank.steps[0], None, "auto", gpus=1).backend == "nccl"


def test_progress_hints_one_at_a_time_and_persist():
    lesson = get_lesson("05")
    progress = Progress()
    first = progress.next_hint(lesson)
    assert first == (1, lesson.hints[0])
    again = Progress()  # a restart reads the file
    assert again.hints_shown(lesson.id) == 1
    assert again.next_hint(lesson)[0] == 2
    while again.next_hint(lesson):
        pass
    assert again.hints_shown(lesson.id) == len(lesson.hints)
    again.record_check(lesson.id, "failed", [])
    assert not Progress().done(lesson.id)
    again.record_check(lesson.id, "passed", [])
    assert Progress().done(lesson.id) and Progress().summary() == (1, 16)
    assert Progress().current == "01-check-gpus"


def test_workspace_copy_is_the_broken_script_and_survives_edits():
    lesson = get_lesson("05")
    path = ensure_workspace(lesson)
    assert path.parent == workspace_dir() and path.read_text() == lesson.exercise.broken.read_text()
    path.write_text("# my edit\n")
    assert ensure_workspace(lesson).read_text() == "# my edit\n"
    assert ensure_workspace(lesson, reset=True).read_text() == lesson.exercise.broken.read_text()


def cli(*args):
    return subprocess.run(mgtutor_argv("lessons", *args), capture_output=True, text=True, env=no_gpu_env(),
                          timeout=60)


@pytest.mark.integration
def test_cli_list_json_contract():
    Progress().record_check("02-single-gpu-baseline", "passed", [])
    done = cli("list", "--json")
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    assert [r["id"] for r in rows] == FIXED_IDS
    assert set(rows[0]) == {"id", "title", "gpu_only", "example", "has_exercise", "done", "done_cpu", "mark"}
    by_id = {r["id"]: r for r in rows}
    assert by_id["02-single-gpu-baseline"]["done"] and not by_id["01-check-gpus"]["done"]
    assert by_id["03-dataparallel"]["gpu_only"] and not by_id["04-ddp-torchrun"]["gpu_only"]
    assert by_id["05-distributed-sampler"]["has_exercise"] and not by_id["01-check-gpus"]["has_exercise"]
    assert all(r["example"].endswith(".py") for r in rows)


@pytest.mark.integration
def test_cli_show_hint_and_bad_input():
    shown = cli("show", "05")
    assert shown.returncode == 0 and "DistributedSampler" in shown.stdout and "workspace" in shown.stdout
    hint = cli("hint", "05")
    assert hint.returncode == 0 and hint.stdout.startswith("hint 1/3:")
    assert cli("hint", "05").stdout.startswith("hint 2/3:")
    bad = cli("check", "nope")
    assert bad.returncode == 2 and "no lesson 'nope'" in bad.stderr and "Traceback" not in bad.stderr
    missing = cli("run")
    assert missing.returncode == 2 and "give a lesson id" in missing.stderr


def test_a_lesson_is_done_on_cpu_when_only_gpu_steps_were_skipped():
    progress = Progress()
    gpu_skip = {"step": "dp", "status": "skipped", "reason": "needs 2 NVIDIA GPU(s); no NVIDIA GPU is usable here"}
    ran = {"step": "cpu", "status": "passed", "reason": None}
    progress.record_check("03-dataparallel", "skipped", [ran, gpu_skip])
    assert progress.done("03-dataparallel") and progress.done_on_cpu("03-dataparallel")
    assert progress.mark("03-dataparallel") == "✓"
    # a missing package, a failure, or nothing run at all is not done
    progress.record_check("07-accelerate", "skipped", [{"step": "a", "status": "skipped",
                                                          "reason": "needs the accelerate package: pip install x"}])
    progress.record_check("01-check-gpus", "skipped", [gpu_skip])
    assert not progress.done("07-accelerate") and not progress.done("01-check-gpus")
    assert progress.mark("07-accelerate") == "–"
    progress.record_check("03-dataparallel", "passed", [ran, {**gpu_skip, "status": "passed"}])  # later, on GPUs
    assert progress.done("03-dataparallel") and not progress.done_on_cpu("03-dataparallel")
    assert Progress().summary()[0] == 1


@pytest.mark.integration
def test_lessons_list_marks_like_the_tui():
    progress = Progress()
    progress.record_check("03-dataparallel", "skipped", [
        {"step": "cpu", "status": "passed", "reason": None},
        {"step": "dp", "status": "skipped", "reason": "needs 2 NVIDIA GPU(s); no NVIDIA GPU is usable here"}])
    progress.record_check("07-accelerate", "skipped", [{"step": "a", "status": "skipped", "reason": "needs the x"}])
    done = subprocess.run(mgtutor_argv("lessons", "list"), capture_output=True, text=True, env=no_gpu_env(),
                          timeout=120)
    lines = {line.split()[1]: line for line in done.stdout.splitlines() if line[:4].strip()[:1] in "✓✗–▸" and
             len(line.split()) > 2 and line.split()[1].isdigit()}
    assert lines["3"].lstrip().startswith("✓") and "(CPU)" in lines["3"] and "[GPU]" in lines["3"]
    assert lines["7"].lstrip().startswith("–")


def test_every_code_block_in_a_lesson_text_names_its_language():
    """Textual's Markdown guesses the language of an unlabelled block with every Pygments lexer (a quarter
    of a second a block): the Lessons screen would open that much later."""
    from markdown_it import MarkdownIt

    from mgtutor.lessons.loader import all_lessons
    from mgtutor.tui.widgets.lesson_text import lesson_markdown
    from mgtutor.training.foundation.i18n import set_language

    lessons = all_lessons()
    unlabelled = []
    for language in ("en", "zh"):
        set_language(language)
        for lesson in lessons:
            tokens = MarkdownIt("gfm-like").parse(lesson_markdown(lesson, len(lessons)))
            unlabelled += [(language, lesson.id, token.content[:40]) for token in tokens
                           if token.type in ("fence", "code_block") and not token.info]
    assert unlabelled == []
