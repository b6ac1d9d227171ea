"""Every CLI command in Simplified Chinese says nothing in English but code, paths, flags, number tables and
what it quotes from a rank or a log (issue 47, "What to build"): each command runs in process through the
CLI's `main` with `--lang zh`, on records, logs and scripts made here (no process starts); the commands that
launch ranks are in tests/test_zh_every_command_runs.py. `--json` prints the same bytes in both languages."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from mgtutor.training.runs.records.record import RankExit, RunMeta, RunRecord, build_result, runs_root
from mgtutor.tui.cli import main
from tests.conftest import REPO
from tests.helpers import stopped_hung_run
from tests.zh_leaks import SCRIPT_LINE, code_of, leaks

DATA = REPO / "tests" / "data"
LOGS = sorted((DATA / "logs").glob("*.log"))
BAD_SCRIPTS = sorted((DATA / "check").glob("*.bad.py"))
HANG = DATA / "hang" / "world-size-signal"


@pytest.fixture(autouse=True)
def no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")


def said(capsys, *argv: str, code: int | tuple[int, ...] | None = 0) -> str:
    """What `mgtutor --lang zh ARGV` prints, stdout then stderr; its exit code checked where given."""
    try:
        got = main(["--lang", "zh", *argv])
    except SystemExit as exit_:  # --help, or argparse's own error
        got = exit_.code
    if code is not None:
        assert got in (code if isinstance(code, tuple) else (code,)), (argv, got)
    out = capsys.readouterr()
    return out.out + out.err


def english_json(capsys, *argv: str) -> str:
    """`--json` output, asserted byte for byte the same in English and in Chinese."""
    at = argv.index("--") if "--" in argv else len(argv)  # after --, a flag is the script's
    argv = (*argv[:at], "--json", *argv[at:])
    main(list(argv))
    english = capsys.readouterr().out
    main(["--lang", "zh", *argv])
    assert capsys.readouterr().out == english, argv
    json.loads(english)
    return english


def ended_run(label: str, exits: tuple[int, ...]) -> RunRecord:
    """A run folder as the launcher and the rank wrappers leave it, its result built from the rank files."""
    record = RunRecord.create(label, runs_root())
    record.write_meta(RunMeta.from_json({"run_id": record.run_id, "label": label, "target": [f"{label}.py"],
                                         "world_size": len(exits), "backend": "gloo", "started": 1.7e9,
                                         "device_note": f"{len(exits)} CPU ranks on gloo (GPUs present, gloo chosen)"}))
    for rank, code in enumerate(exits):
        record.write_rank(RankExit(rank=rank, pid=100 + rank, started=1.7e9, ended=1.7e9 + 3 + rank,
                                   exit_code=code if code >= 0 else None,
                                   signal="SIGTERM" if code < 0 else None))
    record.write_result(build_result(record, torchrun_exit=1 if any(exits) else 0))
    for rank in range(len(exits)):
        record.rank_log(rank, "stderr").parent.mkdir(exist_ok=True)
        record.rank_log(rank, "stderr").write_text("Traceback (most recent call last):\nValueError: boom\n"
                                                   if exits[rank] > 0 else "")
    return record


@pytest.fixture
def runs() -> dict[str, RunRecord]:
    return {"finished": ended_run("fine", (0, 0)), "failed": ended_run("broken", (3, -1)),
            "hung": RunRecord(stopped_hung_run(HANG))}


COMMANDS = [[], ["lessons"], ["doctor"], ["train"], ["run"], ["fit"], ["runs"], ["runs", "show"], ["runs", "stacks"],
            ["runs", "stop"], ["runs", "attach"], ["bench"], ["bench", "allreduce"], ["bench", "scaling"],
            ["bench", "maxbatch"], ["check"], ["convert"], ["diagnose"], ["demo"], ["slurm"], ["k8s"], ["report"],
            ["serve"]]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "mgtutor")
def test_every_command_s_help(capsys, command):
    out = said(capsys, *command, "--help")
    assert leaks(out) == [], out


def test_the_lessons(capsys, tmp_path):
    out = said(capsys, "lessons", "list")
    for number in range(1, 17):
        out += said(capsys, "lessons", "show", str(number)) + said(capsys, "lessons", "hint", str(number), code=None)
    out += said(capsys, "lessons", "show", "99", code=2)
    assert "没有课程 '99'" in out
    code = [code_of(path.read_text()) for path in (REPO / "lessons").glob("*/explanation.md")]  # the same in both
    assert leaks(out, quoted=code) == []


def test_runs_list_show_stop_and_stacks(capsys, runs):
    out = said(capsys, "runs")
    assert "失败" in out and "已结束" in out and "状态" in out
    for record in runs.values():
        out += said(capsys, "runs", "show", record.run_id)
        out += said(capsys, "runs", "stop", record.run_id)
    assert "rank 1：信号 SIGTERM (在第一个失败之后被停止)" in out and "[失败]" in out
    stacks = said(capsys, "runs", "stacks", runs["hung"].run_id)
    assert "卡住报告 (各 rank 的 world size 不一致)" in stacks
    ended = said(capsys, "runs", "stacks", runs["failed"].run_id, code=1)
    assert "状态是 失败" in ended
    ambiguous = said(capsys, "runs", "show", "2026", code=2) + said(capsys, "runs", "show", "zz", code=2)
    assert "对应 2 个运行" in ambiguous or "对应 3 个运行" in ambiguous
    quoted = ["ValueError: boom", *(path.read_text() for path in HANG.rglob("*.txt"))]  # what the ranks said
    assert leaks(out + stacks + ended + ambiguous, quoted=quoted) == []


def test_runs_attach_to_a_run_that_has_ended(capsys, runs):
    out = said(capsys, "runs", "attach", runs["failed"].run_id, code=None)
    assert "运行记录：" in out and "run record" not in out
    assert leaks(out, quoted="ValueError: boom") == []


@pytest.mark.parametrize("log", LOGS, ids=lambda p: p.stem)
def test_diagnose_every_log(capsys, log):
    out = said(capsys, "diagnose", str(log))
    assert leaks(out, quoted=log.read_text(errors="replace")) == []


def test_diagnose_runs_and_what_it_cannot_read(capsys, runs, tmp_path):
    out = said(capsys, "diagnose", runs["failed"].run_id) + said(capsys, "diagnose", runs["hung"].run_id)
    out += said(capsys, "diagnose", str(tmp_path / "nowhere.log"), code=2)
    out += said(capsys, "diagnose", str(tmp_path), str(tmp_path), code=2)
    assert "既不是可读的文件，也不是运行 id" in out and "有 rank 失败" in out
    assert leaks(out, quoted="ValueError: boom") == []


@pytest.mark.parametrize("script", BAD_SCRIPTS, ids=lambda p: p.stem)
def test_check_every_mistake_and_its_fixes(capsys, script, tmp_path):
    copy = tmp_path / script.name
    shutil.copy(script, copy)
    source = script.read_text()
    out = said(capsys, "check", str(copy), code=(0, 1))
    out += said(capsys, "check", "--diff", "--unsafe-fixes", str(copy), code=(0, 1))
    out += said(capsys, "check", "--fix", "--unsafe-fixes", str(copy), code=(0, 1))
    assert leaks(out, quoted=[source, copy.read_text()], code=SCRIPT_LINE.match) == []


def test_check_says_a_fix_s_kind_in_chinese(capsys, tmp_path):
    copy = tmp_path / "amp.py"
    shutil.copy(DATA / "check" / "deprecated-cuda-amp.bad.py", copy)
    out = said(capsys, "check", "--diff", str(copy), code=(0, 1))
    assert "(第 3 行，安全修复)" in out and ", safe)" not in out


@pytest.mark.parametrize("script", sorted((DATA / "check" / "convert").glob("*.py")), ids=lambda p: p.stem)
def test_convert(capsys, script):
    out = said(capsys, "convert", str(script), code=(0, 1, 2))
    assert leaks(out, quoted=script.read_text()) == []


def test_the_job_files(capsys):
    sbatch = said(capsys, "slurm", "--nodes", "2", "--gpus-per-node", "4", "--cpus-per-node", "16", "--partition",
                  "gpu", "--time", "1:00:00", "--nccl-ifname", "eth0", "--env", "A=1", "--", "train.py")
    assert "# 用几台机器；每台运行一个 torchrun。" in sbatch
    assert leaks(sbatch, code=lambda line: not line.startswith("# ")) == []
    # The manifest's comments stay English (YAML for kubectl); --explain says the job in Chinese on stderr.
    main(["--lang", "zh", "k8s", "--image", "img", "--explain", "--", "train.py"])
    assert leaks(capsys.readouterr().err) == []


def test_report(capsys, runs, tmp_path):
    out = said(capsys, "report", runs["failed"].run_id, "--doctor", "none", "-o", str(tmp_path / "r.html"))
    out += said(capsys, "report", runs["hung"].run_id, "--doctor", "none", "--markdown", "-o", str(tmp_path / "r.md"))
    assert leaks(out) == []


def test_json_is_the_same_in_both_languages(capsys, runs, tmp_path):
    english_json(capsys, "runs")
    for record in runs.values():
        english_json(capsys, "runs", "show", record.run_id)
        english_json(capsys, "diagnose", record.run_id)
    english_json(capsys, "runs", "stacks", runs["hung"].run_id)
    for log in LOGS[:8]:
        english_json(capsys, "diagnose", str(log))
    for script in BAD_SCRIPTS[:8]:
        english_json(capsys, "check", str(script))
    english_json(capsys, "lessons", "list")
    english_json(capsys, "lessons", "show", "14")
    english_json(capsys, "k8s", "--image", "img", "--", "train.py")
    assert "failed" in english_json(capsys, "runs", "show", runs["failed"].run_id)
