"""`mgtutor check` as a user calls it, and the check `mgtutor run` does before launching."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from conftest import mgtutor_argv, no_gpu_env
from mgtutor.tui.cli import main as cli_main

SNIPPETS = Path(__file__).parent / "data" / "check"
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
