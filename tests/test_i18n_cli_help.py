"""The command line's own words in Chinese: every subcommand's `--help` (found by walking the parser
tree, so a new command is covered the day it is added), argparse's errors, mgtutor's own error lines;
the English stays as it was and `--json` prints the same JSON whatever the language."""
from __future__ import annotations

import argparse
import json
import re
import shutil

import pytest
from rich.cells import cell_len

from mgtutor.training.runs.events.types import StepEvent
from mgtutor.training.foundation.i18n import set_language
from mgtutor.tui.cli import build_parser, main
from mgtutor.tui.commands.train import progress_line
from mgtutor.tui.help_words import wrap_cells
from tests.conftest import REPO
from tests.english_left import english_left

SCRIPT = str(REPO / "tests/data/check/collective-in-rank-branch.bad.py")
ONE_GPU = str(REPO / "tests/data/check/convert/single_gpu_shape.py")
CHOICES = re.compile(r"\{[\w.,-]+\}")


def parser_tree(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """(the words after `mgtutor`, the parser) for the top parser and every subcommand below it."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from parser_tree(sub, (*path, name))


COMMANDS = {path: parser for path, parser in parser_tree(build_parser())}


def words_left(help_text: str) -> list[str]:
    """What reads as English in a help text, argparse's choice lists ({auto,nccl,gloo}: values, typed
    as they are) aside."""
    return english_left(CHOICES.sub(" ", help_text))


def first_sentence(text: str) -> str:
    return text.split(". ")[0].split(":")[0].strip()


def flags(parser: argparse.ArgumentParser) -> list[str]:
    return sorted(option for action in parser._actions for option in action.option_strings)


def help_text(capsys, *argv: str) -> str:
    with pytest.raises(SystemExit) as exit_:
        main([*argv, "--help"])
    assert exit_.value.code == 0
    return capsys.readouterr().out


def error_text(capsys, *argv: str) -> str:
    with pytest.raises(SystemExit) as exit_:
        main(list(argv))
    assert exit_.value.code == 2
    return capsys.readouterr().err


@pytest.fixture(autouse=True)
def terminal_80_wide(monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")  # argparse wraps its help to the terminal


def test_the_tree_holds_every_command_and_subcommand():
    assert {("run",), ("bench", "allreduce"), ("bench", "scaling"), ("bench", "maxbatch"), ("runs", "stacks"),
            ("runs", "attach"), ("doctor",), ("k8s",), ("serve",)} <= set(COMMANDS)


@pytest.mark.parametrize("path", sorted(COMMANDS), ids=lambda path: " ".join(path) or "mgtutor")
def test_help_is_chinese_and_the_english_is_as_it_was(capsys, path):
    parser = COMMANDS[path]
    chinese = help_text(capsys, "--lang", "zh", *path)
    assert chinese.startswith("用法：mgtutor")
    assert words_left(chinese) == []
    english = help_text(capsys, *path)
    assert english.startswith("usage: mgtutor") and "show this help message and exit" in english
    said = parser.description or ""
    assert said and first_sentence(said) in " ".join(english.split())
    assert first_sentence(said) not in chinese
    for flag in flags(parser):  # the same options under either language
        assert flag in chinese and flag in english


ACTIONS = "ACTION"  # how the usage names the lessons command's subcommand


def test_argparse_errors_in_chinese(capsys):
    """A positional argument is named as the usage shows it, never by its internal name (its dest)."""
    err = error_text(capsys, "--lang", "zh", "lessons", "bogus")
    assert err.startswith("用法：mgtutor lessons")
    assert f"mgtutor lessons: 错误：参数 {ACTIONS}：无效的取值：'bogus' (可选：" in err and "action" not in err
    assert "缺少必需的参数：--image" in error_text(capsys, "--lang", "zh", "k8s", "--", "train.py")
    assert "无法识别的参数：--bogus" in error_text(capsys, "--lang", "zh", "doctor", "--bogus")
    assert "参数 --nproc：需要一个值" in error_text(capsys, "--lang", "zh", "run", "--nproc")
    assert "mgtutor demo: 错误：--nproc 须为不小于 1 的整数 (收到 'x')" in error_text(capsys, "--lang", "zh", "demo", "--nproc", "x")
    err = error_text(capsys, "--lang", "zh", "bench", "allreduce", "-n", "0")
    assert "参数 -n/--iters：须为不小于 1 的整数 (收到 '0')" in err
    assert english_left(err) == []


def test_argparse_errors_stay_english_without_the_flag(capsys):
    err = error_text(capsys, "lessons", "bogus")
    assert err.startswith("usage: mgtutor lessons")
    assert f"mgtutor lessons: error: argument {ACTIONS}: invalid choice: 'bogus' (choose from " in err
    assert "the following arguments are required: --image" in error_text(capsys, "k8s", "--", "train.py")
    assert "argument --nproc: expected one argument" in error_text(capsys, "run", "--nproc")


def test_mgtutor_s_own_error_lines_in_chinese(capsys):
    assert main(["--lang", "zh", "check", SCRIPT, "--unsafe-fixes"]) == 2
    assert capsys.readouterr().err == "mgtutor check: 错误：--unsafe-fixes 要与 --diff 或 --fix 一起用\n"
    assert main(["--lang", "zh", "runs", "stop"]) == 2
    assert capsys.readouterr().err == "mgtutor runs: 错误：stop：请给出运行 id (见 `mgtutor runs`)\n"
    assert main(["--lang", "zh", "bench", "allreduce", "-f", "1"]) == 2  # checked before any rank starts
    assert capsys.readouterr().err == "mgtutor bench allreduce: 错误：-f 须大于 1 (收到 1)\n"
    assert main(["check", SCRIPT, "--unsafe-fixes"]) == 2
    assert capsys.readouterr().err == "mgtutor check: error: --unsafe-fixes goes with --diff or --fix\n"


@pytest.mark.parametrize("argv", [["lessons", "list", "--json"], ["check", SCRIPT, "--json"],
                                  ["convert", ONE_GPU, "--json"], ["runs", "list", "--json"]],
                         ids=["lessons", "check", "convert", "runs"])
def test_json_is_the_same_under_lang_zh(capsys, argv):
    code = main(argv)
    english = capsys.readouterr().out
    assert main(["--lang", "zh", *argv]) == code
    assert capsys.readouterr().out == english
    assert english.lstrip().startswith(("{", "["))


def test_runs_show_in_chinese_and_its_json_in_english(capsys):
    from mgtutor.training.runs.records.record import runs_root

    fixture = REPO / "tests/data/monitor_runs/20260101-000000-train-tinycnn-f1x7"
    shutil.copytree(fixture, runs_root() / fixture.name)
    assert main(["--lang", "zh", "runs", "show", "f1x7"]) == 0
    out = capsys.readouterr().out
    assert "\n  路径     " in out and "\n  rank 数  2，通信后端 nccl" in out and "\n  第一个失败：无\n" in out
    assert main(["runs", "show", "f1x7"]) == 0
    assert "\n  ranks    2 on nccl" in capsys.readouterr().out
    assert main(["runs", "show", "f1x7", "--json"]) == 0
    english = json.loads(capsys.readouterr().out)
    assert main(["--lang", "zh", "runs", "show", "f1x7", "--json"]) == 0
    chinese = json.loads(capsys.readouterr().out)
    for shown in (english, chinese):
        shown["result"].pop("duration_s")  # a lost run's duration runs up to now
    assert chinese == english and english["status"] == "lost"


def test_the_commands_own_lines_in_chinese(capsys):
    assert main(["--lang", "zh", "convert", ONE_GPU]) == 0
    out = capsys.readouterr().out
    assert "single_gpu_shape.py: 已转换为 DDP (以 diff 显示；-o NEW.py 或 --fix 会写入)" in out
    assert f"\n  运行它： mgtutor run --nproc 2 -- {ONE_GPU}\n" in out
    assert main(["--lang", "zh", "demo"]) == 0
    assert capsys.readouterr().out.startswith("场景 ")
    step = StepEvent(rank=1, t=0.0, step=5, samples_per_s=1234.5)
    set_language("zh")
    assert progress_line({1: step}, 200) == "进度：r1 第 5/200 步 1,234/s"
    set_language("en")
    assert progress_line({1: step}, 200) == "progress: r1 step 5/200 1,234/s"


def test_chinese_help_is_wrapped_by_terminal_cells(capsys):
    text = "在汇合 (rendezvous) 主机上：应答 --peer 探测，直到 Ctrl+C。它监听所有网卡 (其他节点必须能连上它)。"
    lines = wrap_cells(text, 24)
    assert all(cell_len(line) <= 24 for line in lines) and len(lines) > 3
    assert "".join(lines).replace(" ", "") == text.replace(" ", "")
    assert not any(line[0] in "，。：" or line.endswith("(") for line in lines)
    out = help_text(capsys, "--lang", "zh", "doctor")
    serve = out[out.index("  --serve "):out.index("  --bind ")].splitlines()
    assert len(serve) > 2 and all(cell_len(line) <= 80 for line in serve)  # textwrap would make them 2x as wide


def test_the_option_tables_errors_follow_the_language():
    """The same words in the launch form and the Diagnostics input line as on the command line."""
    from mgtutor.tui.options.flags import OptionError
    from mgtutor.tui.options.launch import LaunchOptions

    set_language("zh")
    with pytest.raises(OptionError, match=r"^多个节点需要节点 0 的汇合 \(rendezvous\) 端点 HOST:PORT"):
        LaunchOptions.from_text(nnodes="2")
    with pytest.raises(OptionError, match=r"^rank 数 须为不小于 1 的整数 \(收到 '0'\)$"):
        LaunchOptions.from_text(nproc="0")
    set_language("en")
    with pytest.raises(OptionError, match=r"^ranks must be a whole number of at least 1 \(got '0'\)$"):
        LaunchOptions.from_text(nproc="0")


def test_translated_table_headings_keep_their_columns():
    from types import SimpleNamespace

    from mgtutor.tui.commands.bench.scaling import describe_point, header
    from mgtutor.tui.commands.train import summary_table

    row = SimpleNamespace(rank=0, step=10, samples_per_s=1234.0, loss=0.5, mem_peak_mib=100.0, step_s=0.1,
                          data_wait_s=0.01, result=True, error=None)
    summary = SimpleNamespace(ranks=[row], complete=True, samples_per_s=1234.0)
    point = SimpleNamespace(world_size=2, strategy="ddp", samples_per_s=2000.0, speedup=1.9, efficiency=0.95,
                            step_s=0.01, data_wait_s=0.001, compute_s=0.009)
    for language, outcome, ok in (("en", "outcome", "ok"), ("zh", "结果", "通过")):
        set_language(language)
        heading, rank_0, everyone = summary_table(summary).splitlines()
        assert heading.endswith("  " + outcome) and rank_0.endswith("  " + ok)
        assert cell_len(heading) - cell_len(outcome) == cell_len(rank_0) - cell_len(ok)  # the same columns
        assert cell_len(header()) == len(describe_point(point))
    assert everyone.startswith("全部   ") and "加速比" in header()


@pytest.mark.parametrize("fields", [
    {"status": "finished", "duration_s": 12.5, "world_size": 2, "backend": "gloo"},
    {"status": "stopped", "duration_s": 3.0, "world_size": 1, "backend": "nccl"},
    {"status": "failed", "world_size": 2, "backend": "gloo",
     "first_failure": {"rank": 1, "exit_code": 3}},
    {"status": "failed", "world_size": 2, "backend": "gloo", "first_failure": {"rank": 0, "signal": "SIGKILL"}},
    {"status": "lost"},
])
def test_how_a_run_ended_reads_as_the_record_in_english_and_in_chinese(fields) -> None:
    from mgtutor.training.foundation.i18n import set_language
    from mgtutor.training.runs.records.record import RunResult
    from mgtutor.tui.commands.run import describe_result

    result = RunResult.from_json(fields)
    assert describe_result(result) == result.describe()
    set_language("zh")
    said = describe_result(result)
    if fields["status"] != "lost":
        assert said != result.describe() and not english_left(said), said
