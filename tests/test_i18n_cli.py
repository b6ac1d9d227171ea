"""The command line in Chinese: `--lang zh`, the locale and the kept choice pick it; `--json` prints the
English JSON whatever the language, so scripts keep their contract."""
from __future__ import annotations

import json
import re

import pytest

from mgtutor.lessons.progress import Progress
from mgtutor.training.foundation.i18n import current_language
from mgtutor.tui.cli import language_flag, main
from tests.hang_runs import GROUP, ZH_FIX, ZH_REPORT, zh_slow_loader_run  # noqa: F401 - a fixture: one hang, two modules

CHINESE = "检查 GPU 和 CUDA"


def test_lessons_show_in_chinese_with_the_flag(capsys):
    assert main(["--lang", "zh", "lessons", "show", "01-check-gpus"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"第 1 课：{CHINESE}  (01-check-gpus)")
    assert "目标：" in out and "## 要看什么" in out and "检查：脚本运行到了最后" in out
    assert "```sh\npython example.py\n" in out  # code as it is


def test_lessons_show_json_is_the_english_json(capsys):
    assert main(["lessons", "show", "01-check-gpus", "--json"]) == 0
    english = capsys.readouterr().out
    assert main(["--lang", "zh", "lessons", "show", "01-check-gpus", "--json"]) == 0
    assert capsys.readouterr().out == english
    assert json.loads(english)["title"] == "Check your GPUs and CUDA"
    assert current_language() == "en"


def test_the_locale_and_the_kept_choice(capsys, monkeypatch):
    monkeypatch.delenv("LANGUAGE")
    monkeypatch.setenv("LANG", "zh_CN.UTF-8")
    main(["lessons", "list"])
    assert CHINESE in capsys.readouterr().out
    Progress().set_language("en")  # chosen in the app: beats the locale
    main(["lessons", "list"])
    assert "Check your GPUs and CUDA" in capsys.readouterr().out
    main(["--lang", "zh", "lessons", "list"])  # the flag beats both
    assert CHINESE in capsys.readouterr().out


def test_help_is_chinese_and_lists_the_language_flag(capsys):
    with pytest.raises(SystemExit):
        main(["--lang", "zh", "--help"])
    out = capsys.readouterr().out
    assert "从单卡到多卡" in out and "--lang {en,zh}" in out and "--json 的输出始终是英文" in out
    with pytest.raises(SystemExit):
        main(["--lang", "zh", "lessons", "--help"])
    assert "课程在这台机器上真实运行" in capsys.readouterr().out


def test_the_flag_is_read_before_the_command_and_never_from_a_script_s_arguments():
    assert language_flag(["--lang", "zh", "doctor"]) == "zh"
    assert language_flag(["--lang=en", "lessons"]) == "en"
    assert language_flag(["run", "--", "train.py", "--lang", "zh"]) is None
    assert language_flag(["--lang"]) is None and language_flag(["--lang", "fr"]) is None


def test_a_bad_language_is_a_clear_error(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--lang", "fr", "doctor"])
    assert exit_.value.code == 2
    assert "invalid choice: 'fr'" in capsys.readouterr().err


@pytest.mark.integration
@pytest.mark.xdist_group("doctor")
def test_doctor_in_chinese_and_its_json_in_english(doctor_runs, capsys, monkeypatch):
    text = doctor_runs["chinese text"]
    assert text.returncode in (0, 1), text.stderr
    assert "mgtutor doctor：这台机器准备好多卡训练了吗？" in text.stdout
    assert "检查项" in text.stdout and "结论：" in text.stdout and "没有 NVIDIA GPU" in text.stdout
    english = json.loads(doctor_runs["english json"].stdout)
    # `doctor --json` under a Chinese locale, in process: torch's facts are the real run's (not asked of a child
    # again); the language comes from LANG as in a process (test_the_locale_and_the_kept_choice)
    from mgtutor.diagnostics.doctor import versions

    monkeypatch.setattr(versions, "gather", lambda *args, **kwargs: english["torch"])
    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")
    monkeypatch.delenv("LANGUAGE")
    monkeypatch.setenv("LANG", "zh_CN.UTF-8")
    main(["doctor", "--json"])
    chinese = json.loads(capsys.readouterr().out)
    # the part with words: identical, but for sizes of free space, which other processes change between the runs
    assert without_sizes(chinese["checks"]) == without_sizes(english["checks"])
    assert set(chinese) == set(english) and not re.search(r"[\u4e00-\u9fff]", json.dumps(chinese))
    assert any(check["message"].startswith("no NVIDIA GPU") for check in english["checks"])


def without_sizes(checks: list[dict]) -> list[dict]:
    return [{**check, "message": re.sub(r"\d+(\.\d+)? (GiB|MiB|KiB)", r"N \2", check["message"])} for check in checks]


def test_argparse_s_own_words_follow_the_language(capsys):
    with pytest.raises(SystemExit):
        main(["--lang", "zh", "doctor", "--help"])
    out = capsys.readouterr().out
    assert out.startswith("用法：mgtutor doctor") and "选项：" in out and "显示此帮助信息并退出" in out
    with pytest.raises(SystemExit):
        main(["doctor", "--help"])
    out = capsys.readouterr().out
    assert out.startswith("usage: mgtutor doctor") and "show this help message and exit" in out


def test_diagnose_in_chinese_and_its_json_in_english(capsys):
    from tests.conftest import REPO

    log = str(REPO / "tests/data/logs/collective_timeout_nccl.log")
    assert main(["--lang", "zh", "diagnose", log]) == 0
    out = capsys.readouterr().out
    assert "的诊断：1 项结果" in out and "在一次集合通信" in out and "rank 2 始终没有加入" in out
    assert "解决：找出没有进入这次集合通信的 rank" in out and "课程：14-when-it-goes-wrong" in out
    assert main(["diagnose", log, "--json"]) == 0
    english = capsys.readouterr().out
    assert main(["--lang", "zh", "diagnose", log, "--json"]) == 0
    assert capsys.readouterr().out == english
    assert "never joined" in json.loads(english)["findings"][0]["summary"]


def test_check_in_chinese_and_its_json_in_english(capsys):
    from tests.conftest import REPO

    script = str(REPO / "tests/data/check/collective-in-rank-branch.bad.py")
    assert main(["--lang", "zh", "check", script]) == 1
    out = capsys.readouterr().out
    assert "1 个错误，1 条建议" in out and "原因：  集合通信" in out and "init_process_group 没有设置超时" in out
    assert main(["check", script, "--json"]) == 1
    english = capsys.readouterr().out
    assert main(["--lang", "zh", "check", script, "--json"]) == 1
    assert capsys.readouterr().out == english
    assert "init_process_group without a timeout" in english


@pytest.mark.integration
@pytest.mark.timeout(300)
@pytest.mark.xdist_group(GROUP)  # the run is test_hang_cli.py's too (tests/hang_runs.py)
def test_run_prints_its_hang_report_in_chinese_and_diagnose_json_stays_english(zh_slow_loader_run):
    # `mgtutor --lang zh run ... hang.py --mode slow-loader`: its hang report and fix were printed in Chinese
    # (the fixture waits for both lines: ZH_REPORT, ZH_FIX), then Ctrl+C
    run = zh_slow_loader_run
    assert ZH_REPORT in run.err and ZH_FIX in run.err
    assert run.returncode == 130, run.err[-2000:]
    assert "rank 1 的 DataLoader 卡住了" in run.err
    data = run.diagnosed  # `mgtutor diagnose RECORD --json`
    assert data["findings"][0]["kind"] == "rank_outside_collective"
    assert "the waiting ranks cannot go on" in data["findings"][0]["summary"]  # the record keeps the English
