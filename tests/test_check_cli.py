"""`mgtutor check` as a user calls it, and the check `mgtutor run` does before launching."""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import mgtutor_argv, no_gpu_env
from mgtutor.tui.cli import main as cli_main

SNIPPETS = Path(__file__).parent / "data" / "check"
FOLLOW = SNIPPETS / "follow"
JSON_KEYS = {"rule", "severity", "file", "line", "message", "fix", "lesson"}
MIXED = """\
import torch
import torch.distributed as dist
from torch.utils.data import DataLoader

dist.init_process_group("gloo")
loader = DataLoader(ds, batch_size=8, shuffle=True)
scaler = torch.cuda.amp.GradScaler()
"""


def test_text_report_groups_by_severity_with_the_code(write_script, capsys):
    path = write_script("train.py", MIXED)
    assert cli_main(["check", str(path)]) == 1
    out = capsys.readouterr().out
    assert out.splitlines()[0] == f"{path}: 1 error, 1 warning, 1 advice"
    errors, warnings, advice = out.index("\nERRORS\n"), out.index("\nWARNINGS\n"), out.index("\nADVICE\n")
    assert errors < out.index("[ddp-no-sampler]") < warnings < out.index("[deprecated-cuda-amp]") < advice
    assert "    6 | loader = DataLoader(ds, batch_size=8, shuffle=True)" in out
    assert "lesson: 05-distributed-sampler" in out and "+ sampler = DistributedSampler(ds)" in out


def test_json_report_and_exit_codes(write_script, capsys):
    assert cli_main(["check", str(write_script("train.py", MIXED)), "--json"]) == 1
    findings = json.loads(capsys.readouterr().out)["findings"]
    assert [f["rule"] for f in findings] == ["ddp-no-sampler", "deprecated-cuda-amp", "init-no-timeout"]
    assert all(JSON_KEYS <= set(f) for f in findings)
    assert findings[0]["line"] == 6 and findings[0]["lesson"] == "05-distributed-sampler"
    assert cli_main(["check", str(SNIPPETS / "deprecated-cuda-amp.bad.py"), "--json"]) == 0  # warnings only
    assert cli_main(["check", str(SNIPPETS / "clean_spawn_workers.py")]) == 0
    assert capsys.readouterr().out.rstrip().endswith("clean_spawn_workers.py: no findings")


def test_brief_and_min_severity(write_script, capsys):
    assert cli_main(["check", str(write_script("train.py", MIXED)), "--brief", "--min-severity", "warning"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3 and "[ddp-no-sampler]" in lines[1] and "[deprecated-cuda-amp]" in lines[2]


@pytest.mark.parametrize("content, expected", [
    (b"print 'old'\n", "Python 2 syntax"),
    (b"\xff\xfe\x00garbage", "not utf-8 text"),
    (b"def (:\n", "syntax error"),
])
def test_unreadable_script_exits_2_with_one_line(write_script, tmp_path, capsys, content, expected):
    path = tmp_path / "bad.py"
    path.write_bytes(content)
    assert cli_main(["check", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("mgtutor check: error: ") and expected in err


@pytest.mark.integration
def test_cli_process_never_shows_a_traceback(tmp_path):
    path = tmp_path / "latin.py"
    path.write_bytes(b"name = 'caf\xe9'\n")
    proc = subprocess.run(mgtutor_argv("check", str(path)), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip() == f"mgtutor check: error: {path}: not utf-8 text (byte 0xe9 at offset 11); " \
                                  "is this a Python script?"
    proc = subprocess.run(mgtutor_argv("check", str(tmp_path / "missing.py")), capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1


@pytest.mark.integration
def test_run_prints_the_check_first_and_still_runs(write_script):
    script = write_script("ddp_mistake.py", (
        "def never_called():\n"
        "    import torch.distributed as dist\n"
        "    from torch.utils.data import DataLoader\n"
        "    dist.init_process_group('gloo')\n"
        "    return DataLoader(ds, shuffle=True)\n"
        "print('trained')\n"))
    proc = subprocess.run(mgtutor_argv("run", "--nproc", "1", "--", str(script)), capture_output=True, text=True,
                          timeout=180, env=no_gpu_env())
    assert proc.returncode == 0, proc.stderr
    assert f"mgtutor check: 1 error, 2 advice in {script}" in proc.stderr
    assert "  error: line 5 [ddp-no-sampler]" in proc.stderr
    assert proc.stderr.index("mgtutor check:") < proc.stderr.index("rank(s), backend")
    assert "[rank 0] trained" in proc.stdout


def test_folder_json_keeps_the_contract_with_a_file_per_finding(tmp_path, capsys):
    project = tmp_path / "proj"
    shutil.copytree(FOLLOW / "helper_env", project)
    (project / "train.py").write_text((project / "train.py").read_text() + "\nimport torch\ntorch.load('x.pt')\n")
    assert cli_main(["check", str(project), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["file"] == str(project)
    assert data["files"] == [str(project / "train.py"), str(project / "utils.py")] and data["skipped"] == []
    assert data["findings"] and all(JSON_KEYS <= set(f) and f["file"] in data["files"] for f in data["findings"])
    by_file = {(f["file"], f["rule"]) for f in data["findings"]}
    assert (str(project / "train.py"), "torch-load-no-map-location") in by_file
    assert not any(rule == "local-rank-argument" for _, rule in by_file)


def test_folder_text_report_groups_by_file_and_shows_caveats(tmp_path, capsys):
    project = tmp_path / "proj"
    project.mkdir()
    shutil.copy(FOLLOW / "helper_unread.py", project / "train.py")
    (project / "notes.py").write_text("def helper():\n    return 1\n")
    assert cli_main(["check", str(project)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == f"{project}: 2 file(s) checked, 2 advice"
    assert f"{project / 'train.py'}: 2 advice" in out and f"{project / 'notes.py'}: no findings" in out
    assert "may not apply: the distributed setup happens in training_toolkit.dist.init_distributed_mode()" in out
    assert cli_main(["check", str(project), "--brief"]) == 0
    brief = capsys.readouterr().out
    assert "(may not apply)" in brief and "notes.py" not in brief


def test_folder_with_an_unreadable_module_checks_the_rest(tmp_path, capsys):
    project = tmp_path / "proj"
    project.mkdir()
    (project / "train.py").write_text("import lib.helpers\nif __name__ == '__main__':\n    lib.helpers.go()\n")
    (project / "lib").mkdir()
    (project / "lib" / "helpers.py").write_bytes(b"def go(:\n")
    assert cli_main(["check", str(project), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["files"] == [str(project / "train.py")]
    assert data["skipped"][0]["file"] == str(project / "lib" / "helpers.py")
    assert "syntax error" in data["skipped"][0]["reason"]
    (project / "train.py").write_bytes(b"def broken(:\n")
    assert cli_main(["check", str(project)]) == 2
    assert "no file could be checked" in capsys.readouterr().err


def test_folder_without_scripts_exits_2(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert cli_main(["check", str(tmp_path / "empty")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no Python script in this folder" in err
