"""`mgtutor report` of real runs, opened in a real browser: a failed 2-rank CPU run (rank 1 crashes)
and a hung one (the script asks for 3 ranks of 2). No console error, no request but the file itself,
every chart drawn, the diagnosis and both ranks visible; the screenshot is kept in the test's tmp dir.
The issue body (--markdown) of the same runs has every template field; a planted secret is in neither.
The failed run is the crash demo's, made once for its readers (`zh_demo_crash_run`, tests/demo_runs.py: the
trainer on two gloo ranks under the real torchrun, rank 1 raising at step 3), so the module's tests share its
xdist worker; the hung run is made once for them. The failed run's HTML takes the doctor report fresh
(`report`'s default: a torch child), the other reports read a doctor report kept in the runs' state
(`--doctor saved`), so torch is asked once, not four times."""
from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

from mgtutor.training.runs.launch.launcher import LAUNCHER_ENV
from mgtutor.training.runs.records.record import RunRecord, RunStatus
from mgtutor.training.runs.follow.samples import read_samples
from tests.browser import chromium
from tests.conftest import STANDIN_LAUNCHER, mgtutor_argv, no_gpu_env
from tests.demo_runs import GROUP, zh_demo_crash_run  # noqa: F401 - a fixture: the crash demo's one run
from tests.test_report import ISSUE_FIELDS

# the crash demo's worker: its run is made once for all its readers, the hung run once for the three tests here
pytestmark = [pytest.mark.integration, pytest.mark.xdist_group(GROUP)]
SECRET = "planted-secret-value-8c1f"
CHART_LINES = """() => Array.from(document.querySelectorAll('figure.chart')).map(figure => {
  const lines = Array.from(figure.querySelectorAll('g[id^="series-"]'));
  const width = Math.max(0, ...lines.map(line => line.getBoundingClientRect().width));
  return {id: figure.id, lines: lines.length, width};
})"""


def cli(*args: str, state: Path, timeout: float = 240, **env_extra: str) -> subprocess.CompletedProcess[str]:
    env = dict(no_gpu_env(), XDG_STATE_HOME=str(state), MY_SERVICE_TOKEN=SECRET, **env_extra)
    return subprocess.run(mgtutor_argv(*args), capture_output=True, text=True, env=env, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def run_id(proc: subprocess.CompletedProcess[str]) -> str:
    match = re.search(r"run record: (\S+)", proc.stdout)
    assert match, proc.stdout + proc.stderr
    return Path(match.group(1)).name


@pytest.fixture(scope="module")
def runs(tmp_path_factory, zh_demo_crash_run) -> tuple[Path, dict[str, str]]:
    """Two real runs through the CLI (each records its meters as it goes), in this module's state: a copy of the
    crash demo's record (the secret lines below go into the copy), and a hung run whose real ranks the stand-in
    torchrun starts (what is reported of it is mgtutor's record, not torchrun's doing)."""
    state = tmp_path_factory.mktemp("state")
    failed = Path(shutil.copytree(zh_demo_crash_run.record, state / "mgtutor" / "runs" / zh_demo_crash_run.record.name))
    assert RunRecord(failed).status() == RunStatus.FAILED
    standin = {LAUNCHER_ENV: STANDIN_LAUNCHER}
    hung = cli("run", "--nproc", "2", "--backend", "gloo", "--hang-after", "3", "--stop-on-hang", "--",
               "-m", "mgtutor.training.worker.probes.demos", "world-size", "--timeout", "1800", state=state,
               **standin)
    assert "hang report" in hung.stderr, hung.stderr
    ids = {"failed": failed.name, "hung": run_id(hung)}
    for run in ids.values():  # `mgtutor demo` and `mgtutor run` recorded their meters as they went
        rows = read_samples(RunRecord(state / "mgtutor" / "runs" / run))
        assert any({m.rank for m in row.ranks} == {0, 1} for row in rows), rows  # both ranks measured
    for run in ids.values():  # a script that printed its secret: the report must take it out of the log
        with (state / "mgtutor" / "runs" / run / "logs" / "rank1.stderr.log").open("a") as log:
            log.write(f"MY_SERVICE_TOKEN={SECRET}\nconnecting with {SECRET}\n")
    keep_a_doctor_report(state)
    return state, ids


def keep_a_doctor_report(state: Path) -> None:
    """The doctor report `--doctor saved` reads, as `mgtutor doctor` keeps it: this machine's report, with
    torch's facts given (the fresh one, from a torch child, is the failed run's HTML report's)."""
    from mgtutor.diagnostics.doctor import saved
    from mgtutor.diagnostics.doctor.report import collect

    facts = {"torch": "2.14.1", "cuda": "13.0", "nccl": "2.27.3", "packages": {"torch": "2.14.1"}}
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_STATE_HOME", str(state))
        patch.setenv("MGTUTOR_NO_NVML", "1")
        saved.save("doctor", collect(torch=facts))


def make_report(state: Path, run: str, out: Path, *extra: str) -> Path:
    proc = cli("report", run, "-o", str(out), *extra, state=state)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(out)  # the CLI prints the file's path
    return out


@pytest.mark.parametrize("which", ["failed", "hung"])
def test_the_report_opens_offline_in_a_browser(runs, which, tmp_path):
    state, ids = runs
    doctor = () if which == "failed" else ("--doctor", "saved")  # `report`'s default, fresh: once
    path = make_report(state, ids[which], tmp_path / f"{which}.html", *doctor)
    assert path.stat().st_size < 5 * 1024 * 1024
    url = path.as_uri()
    errors: list[str] = []
    requests: list[str] = []
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.on("request", lambda request: requests.append(request.url))
        page.goto(url, wait_until="load")
        charts = page.evaluate(CHART_LINES)
        diagnosis = page.locator("#diagnosis .finding").first
        assert diagnosis.is_visible()
        kind = diagnosis.inner_text()
        if which == "failed":
            assert "child_failed" in kind and "rank 1" in kind
            for rank in (0, 1):  # each rank's own log, its traceback's first line marked
                assert page.locator("#logs h3", has_text=f"rank {rank} — logs/rank{rank}.stderr.log").is_visible()
            assert page.locator(".first-error", has_text="Traceback").count() >= 2
            expected = {"chart-throughput", "chart-loss", "chart-step_time", "chart-data_wait", "chart-rank_cpu",
                        "chart-rank_rss", "chart-host_cpu"}
        else:
            assert "world_size_mismatch" in kind
            for rank in (0, 1):
                stack = page.locator(f"#stack-rank{rank}")
                assert stack.is_visible() and "init_process_group" in stack.inner_text()
            expected = {"chart-rank_cpu", "chart-rank_rss", "chart-host_cpu"}
        page.screenshot(path=str(tmp_path / f"{which}.png"), full_page=True)
    assert (tmp_path / f"{which}.png").stat().st_size > 10_000
    assert errors == []
    assert requests == [url]  # the file itself, nothing else
    assert expected <= {c["id"] for c in charts}
    for chart in charts:
        assert chart["lines"] >= 1 and chart["width"] > 0, chart
    html = path.read_text()
    assert SECRET not in html and "MY_SERVICE_TOKEN=&lt;redacted&gt;" in html


def test_the_issue_body_of_both_runs(runs, tmp_path):
    state, ids = runs
    host = socket.gethostname()
    for which, run in ids.items():
        body = make_report(state, run, tmp_path / f"{which}.md", "--markdown", "--redact-hosts",
                           "--doctor", "saved").read_text()
        assert len(body) <= 65536
        for name in ISSUE_FIELDS if which == "hung" else [f for f in ISSUE_FIELDS if f != "Hang report"]:
            assert name in body, (which, name)
        assert SECRET not in body and "MY_SERVICE_TOKEN=<redacted>" in body
        assert not re.search(rf"(?<![\w-]){re.escape(host)}(?![\w-])", body)
    proc = cli("report", ids["hung"], "--markdown", "--json", "--doctor", "none", state=state)
    data = json.loads(proc.stdout)
    assert data["format"] == "markdown" and Path(data["path"]).name == "issue.md"
