"""The commands that launch ranks, in Simplified Chinese (issue 47's leak test, the process half; the rest is
tests/test_zh_every_command.py): `run` (a run that ends and one that fails), `train`, `demo`, `bench allreduce`,
`doctor` and its rendezvous probe, `lessons run`, `runs stacks` and `runs stop` on a run that goes. Each is the
real command in its own process with `--lang zh`; nothing it prints outside the ranks' own lines is English.
A script that needs the run's record reads it from $MGTUTOR_RECORD_FILE, never from the translated line.
Runs that other tests make the same way are read from theirs: the Chinese doctor from `doctor_runs` (the doctor
group), the Chinese bench and the Chinese probe from `zh_bench_run` and `zh_probe_run` (tests/zh_runs.py, shared
with test_i18n_diagnostics.py), the Chinese crash demo from `zh_demo_crash_run` (tests/demo_runs.py, shared with
test_demos.py). Where what is checked is mgtutor's own words and the ranks' own lines (a run that ends, `train`,
`bench allreduce`, `lessons run`, `runs`/`runs stacks`/`runs stop` on a run that goes), the ranks start through
the torch-free stand-in torchrun (`standin_torchrun`; the ranks are real, torch and all where they use it); the
run that fails stays on the real torchrun, whose failure the diagnosis quotes, and so does the probe, whose
rendezvous is torchrun's."""
from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import mgtutor_argv, no_gpu_env
from tests.helpers import wait_for
from tests.zh_leaks import leaks
from tests.demo_runs import zh_demo_crash_run  # noqa: F401 - a fixture: one zh crash demo for two modules
from tests.zh_runs import zh_bench_run, zh_probe_run  # noqa: F401 - fixtures: one zh bench, one zh probe, two modules

pytestmark = pytest.mark.integration  # starts processes

PRINTS = "import os\nprint('hello from', os.environ['RANK'])\n"
FAILS = "import os, sys, time\nif os.environ['RANK'] == '1':\n    raise ValueError('bad batch')\ntime.sleep(30)\n"
SLEEPS = "import time\nprint('ready', flush=True)\ntime.sleep(600)\n"


def zh(*args: str, timeout: float = 240, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(mgtutor_argv("--lang", "zh", *args), capture_output=True, text=True, timeout=timeout,
                          env={**no_gpu_env(), **(env or {})})


def said(proc: subprocess.CompletedProcess[str]) -> str:
    return proc.stdout + proc.stderr


def logs_of(proc: subprocess.CompletedProcess[str]) -> list[str]:
    """What the runs a command launched wrote themselves (rank logs, torchrun.log): its diagnosis quotes them."""
    folders = [Path(line.split("：", 1)[1]) for line in proc.stdout.splitlines() if line.startswith("运行记录：")]
    return [path.read_text(errors="replace") for folder in folders for path in folder.rglob("*.log")]


def test_run_a_run_that_ends_and_one_that_fails(write_script, tmp_path, monkeypatch, standin_torchrun):
    kept = tmp_path / "record"  # the run that ends: mgtutor's own lines, its ranks started by the stand-in
    ok = zh("run", "--nproc", "2", "--", str(write_script("hello.py", PRINTS)), env={"MGTUTOR_RECORD_FILE": str(kept)})
    assert ok.returncode == 0, ok.stderr
    record = Path(kept.read_text().strip())
    assert ok.stdout.splitlines()[-1] == f"运行记录：{record}" and (record / "meta.json").is_file()
    monkeypatch.delenv("MGTUTOR_LAUNCHER")  # the run that fails: torchrun's own failure, quoted
    failed = zh("run", "--nproc", "2", "--", str(write_script("fails.py", FAILS)))
    assert failed.returncode != 0
    assert "诊断：" in failed.stderr and "run record" not in failed.stdout
    assert leaks(said(ok) + said(failed), quoted=logs_of(failed)) == []


def test_train(tmp_path, standin_torchrun):
    # The real trainer on one gloo rank, started by the stand-in: what is read is mgtutor's words and the rank's own
    # lines, the same on one rank as on two (the progress line only several ranks get, in Chinese:
    # test_i18n_cli_help.py; two ranks training for real: test_train.py).
    kept = tmp_path / "record"
    proc = zh("train", "--nproc", "1", "--steps", "4", "--log-every", "2", "--model", "tinycnn",
              env={"MGTUTOR_RECORD_FILE": str(kept)})
    assert proc.returncode == 0, proc.stderr
    out = said(proc)
    assert "[rank 0] CUDA 图：关闭" in out and "[rank 0] 完成：4 步" in out, out  # the trainer's own lines too
    assert "通过" in out and Path(kept.read_text().strip()).is_dir()
    assert leaks(out) == []


@pytest.mark.xdist_group("zh_demo_crash")  # the demo run is test_demos.py's too (tests/demo_runs.py)
def test_demo(zh_demo_crash_run):
    demo = zh_demo_crash_run.proc  # `mgtutor --lang zh demo crash --nproc 2`
    assert "运行记录：" in demo.stdout, demo.stdout
    assert leaks(said(demo), quoted=logs_of(demo)) == []


@pytest.mark.xdist_group("zh_bench")  # the bench run is test_i18n_diagnostics.py's too (tests/zh_runs.py)
def test_bench_allreduce(zh_bench_run):
    bench = zh_bench_run.proc  # `--lang zh bench allreduce --nproc 2 --backend gloo -b 8 -e 1K -f 128 ... --check`
    assert "运行记录：" in bench.stdout, bench.stdout
    # the bench's table is nccl-tests' own, header and footer included, so the two read side by side
    nccl_tests_table = re.compile(r"^#[^\u4e00-\u9fff]*$").match
    assert leaks(said(bench), code=nccl_tests_table) == []


@pytest.mark.xdist_group("doctor")
def test_doctor(doctor_runs):
    doctor = doctor_runs["chinese text"]  # `mgtutor --lang zh doctor`, the run test_i18n_cli.py reads too
    host = " ".join(os.uname()[0:1] + os.uname()[2:3])  # the OS's own name and kernel are data
    # the OS's name and kernel, the CPU's instruction-set flags: the machine's own words
    assert leaks(said(doctor), allow=(os.uname()[2], host, "avx")) == []


@pytest.mark.xdist_group("zh_probe")  # the probe is test_i18n_diagnostics.py's too (tests/zh_runs.py)
def test_doctor_rendezvous_probe(zh_probe_run):
    probe = zh_probe_run.proc  # `--lang zh doctor --rendezvous --nproc 2 ... --skip-rank 1`: rank 0 waits alone
    assert probe.returncode == 1, said(probe)
    assert "秒后到达  然后等待其他 rank" in probe.stdout and "始终没有加入" in probe.stdout, probe.stdout
    assert leaks(said(probe)) == []


def test_lessons_run(standin_torchrun):  # lesson 01's real script; the stand-in starts its rank
    proc = zh("lessons", "run", "1", timeout=300)
    assert "运行记录：" in said(proc)
    assert leaks(said(proc)) == []


def test_runs_stacks_and_stop_on_a_run_that_goes(write_script, standin_torchrun):
    run = subprocess.Popen(mgtutor_argv("run", "--nproc", "2", "--", str(write_script("sleeps.py", SLEEPS))),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=no_gpu_env(),
                           start_new_session=True)
    try:
        state = Path(os.environ["XDG_STATE_HOME"]) / "mgtutor" / "runs"
        folder = wait_for(lambda: next(iter(state.glob("*sleeps*")), None), 60, what="the run's folder")
        wait_for(lambda: len(list((folder / "ranks").glob("rank*.json"))) == 2, 60, what="both ranks")
        time.sleep(1)
        runs = zh("runs")
        stacks = zh("runs", "stacks", folder.name)
        stop = zh("runs", "stop", folder.name, "--grace", "5")
        assert "运行中" in runs.stdout and stop.returncode == 0, said(stop)
        assert "已停止" in stop.stdout or "停止" in stop.stdout
        sources = [path.read_text() for path in folder.rglob("rank*.txt")]  # the ranks' stacks, quoted
        assert leaks(said(runs) + said(stacks) + said(stop), quoted=sources) == []
    finally:
        run.wait(60)
