"""mgtutor report from a run record on disk: the HTML (facts, diagnosis, both ranks' stacks and Flight
Recorder entries, charts, logs with the first error marked), the Markdown issue body (every field,
GitHub's limit), and what neither may carry (secrets; host names and addresses with --redact-hosts).
The record is a real run's files (tests/data); the real-run and browser tests are test_report_browser.py."""
from __future__ import annotations

import json
import os
import re
import shutil
import stat
from pathlib import Path

import pytest

from mgtutor.diagnostics.doctor import saved
from mgtutor.diagnostics.doctor.report import collect
from mgtutor.diagnostics.report.redact import Redactor
from mgtutor.diagnostics.report.render import GITHUB_BODY_LIMIT, build, fence, to_html, to_markdown, write_report
from mgtutor.training.runs.records.record import RunRecord, runs_root

DATA = Path(__file__).parent / "data"
FIXTURE = DATA / "monitor_runs" / "20260101-000000-train-tinycnn-f1x7"
SECRET = "sk-planted-0123456789"
HOST = "gpubox-17.cluster.example"
ADDR = "10.20.30.40"
# The fields the PyTorch and NCCL bug templates ask for, as the issue body titles them.
ISSUE_FIELDS = ("Describe the bug", "Kind of problem", "Minimal repro", "Full traceback", "Diagnosis",
                "Hang report", "Ranks and nodes", "NCCL version", "First NCCL WARN",
                "NCCL_DEBUG=INFO logs, one per rank", "Topology", "Versions", "collect_env", "Environment")


@pytest.fixture(scope="module", autouse=True)
def fonts_listed(tmp_path_factory):
    """matplotlib lists the system's fonts once per cache folder (fc-list: a process). Module-scoped,
    this runs before the fast tier's no-process rule is set up for the first test, and only once."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MPLCONFIGDIR", str(tmp_path_factory.mktemp("matplotlib")))
        import matplotlib.font_manager  # noqa: F401 - builds the font list now

        yield


@pytest.fixture
def hung_record(monkeypatch) -> RunRecord:
    """The Monitor's fixture run, plus a hang capture (tests/data/hang), gloo Flight Recorder dumps,
    GPU samples, a traceback in rank 1's log and secrets planted in its environment and its log."""
    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")
    monkeypatch.setenv("MY_SERVICE_TOKEN", SECRET)
    path = runs_root() / FIXTURE.name
    shutil.copytree(FIXTURE, path)
    meta = json.loads((path / "meta.json").read_text())
    meta.update(host=HOST, rdzv_endpoint=f"{ADDR}:29400", env={"MASTER_ADDR": ADDR, "NCCL_DEBUG": "INFO",
                                                               "HF_TOKEN": SECRET})
    (path / "meta.json").write_text(json.dumps(meta))
    events = [json.loads(line) for line in (path / "events.jsonl").read_text().splitlines()]
    for event in events:  # the fixture's steps carry loss and throughput; the trainer's carry these too
        if event["type"] == "step":
            event.update(data_wait_s=0.001 * event["rank"], compute_s=0.02, mem_alloc_mib=100.0 + event["step"])
    (path / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    capture = path / "stacks" / "20260101-000100-1-stall"
    shutil.copytree(DATA / "hang" / "world-size-signal", capture)
    shutil.copytree(DATA / "fr_gloo", path / "fr")
    with (path / "logs" / "rank1.stderr.log").open("a") as log:
        log.write(f"connecting to {HOST} ({ADDR}) with MY_SERVICE_TOKEN={SECRET}\n"
                  "Traceback (most recent call last):\n  File \"train.py\", line 9, in <module>\n"
                  "RuntimeError: boom on rank 1\n"
                  f"{HOST}:1234:99 [1] NCCL WARN Net : Connection closed by remote peer {ADDR}<41234>\n")
    rows = [{"t": 1767225600.0 + i, "gpu_error": None, "host": {"cpu_pct": 20.0 + i},
             "gpus": [{"index": g, "name": "NVIDIA H200", "util_pct": 90 + g, "mem_used_mib": 4000 + 10 * i,
                       "mem_total_mib": 143771, "power_w": 300.0 + i, "temp_c": 50 + g} for g in (0, 1)],
             "ranks": {"0": {"pid": 4242, "cpu_pct": 99.0, "rss_mib": 900.0 + i}}} for i in range(6)]
    (path / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    facts = {"torch": "2.14.1", "cuda": "13.0", "nccl": "2.27.3", "packages": {"torch": "2.14.1"}}
    saved.save("doctor", collect(torch=facts))
    return RunRecord(path)


def test_the_html_has_every_part_of_the_run(hung_record):
    html = to_html(build(hung_record, doctor="saved"))
    assert len(html.encode()) < 5 * 1024 * 1024
    for section in ("run", "diagnosis", "hang", "charts", "logs", "doctor", "environment"):
        assert f'<section id="{section}">' in html
    assert "world_size_mismatch" in html  # the hang report's diagnosis
    for rank in (0, 1):
        assert f'id="stack-rank{rank}"' in html
    assert "init_process_group" in html  # a frame of the stacks
    assert 'class="fr"' in html  # the gloo Flight Recorder entries, per rank
    for chart in ("throughput", "loss", "step_time", "data_wait", "gpu_memory",
                  "gpu_util", "gpu_mem", "gpu_power", "gpu_temp", "rank_cpu", "rank_rss", "host_cpu"):
        figure = re.search(rf'<figure class="chart" id="chart-{chart}">(.*?)</figure>', html, re.S)
        assert figure, chart
        assert 'id="series-' in figure.group(1), chart  # a drawn data line, not only axes
    assert re.search(r'class="first-error"[^>]*><span class="n">\d+</span>Traceback', html)
    # nothing to fetch: no external URL in any src/href, no script at all
    assert not re.search(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", html)
    assert "<script" not in html


@pytest.mark.integration
def test_secrets_never_appear_and_hosts_go_on_request(hung_record):
    report = build(hung_record, doctor="saved")
    html, markdown = to_html(report), to_markdown(report)
    for text in (html, markdown):
        assert SECRET not in text
        assert "&lt;redacted&gt;" in text or "<redacted>" in text
        assert HOST in text  # kept unless asked
    hidden = build(hung_record, doctor="saved", redact_hosts=True)
    for text in (to_html(hidden), to_markdown(hidden)):
        assert SECRET not in text and HOST not in text and "gpubox-17" not in text and ADDR not in text
        assert re.search(r"\bhost-\d+\b", text) and "addr-1" in text  # host-1 may be this machine's name


def test_the_issue_body_has_every_template_field(hung_record):
    body = to_markdown(build(hung_record, doctor="saved"))
    assert len(body) <= GITHUB_BODY_LIMIT
    for name in ISSUE_FIELDS:
        assert name in body, name
    assert "<details>" in body and "</details>" in body
    assert "NCCL WARN Net : Connection closed" in body  # the first NCCL WARN, quoted
    assert "RuntimeError: boom on rank 1" in body  # the traceback of the rank that failed
    assert "2.27.3" in body  # NCCL's version from the doctor report
    assert "hang" in body.split("Kind of problem", 1)[1][:80]


def test_long_logs_shrink_until_the_body_fits_githubs_limit(hung_record):
    for log in [*(hung_record.path / "logs").glob("*.log"), hung_record.path / "torchrun.log"]:
        with log.open("a") as out:
            for i in range(300):
                out.write(f"step {i} " + "x" * 600 + "\n")
    body = to_markdown(build(hung_record, doctor="none"))
    assert len(body) <= GITHUB_BODY_LIMIT
    assert "last 40 here" not in body and re.search(r"last (20|10|4|0) here", body)  # fewer lines, same fields
    for name in ("Describe the bug", "Ranks and nodes", "Environment"):
        assert name in body


@pytest.mark.integration
def test_the_file_is_written_for_its_owner_only(hung_record, tmp_path):
    path = write_report(hung_record, tmp_path / "out" / "r.html", doctor="none")
    assert path.read_text().startswith("<!DOCTYPE html>")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    default = write_report(hung_record, markdown=True, doctor="none")
    assert default == hung_record.path / "issue.md"


def test_redactor_rules():
    clean = Redactor(hosts=True, environ={"WANDB_API_KEY": "abcd-1234", "PATH": "/usr/bin", "AUTH": "xy"})
    clean.learn_hosts(["node7.example.org", "192.168.1.7:29500"])
    clean.learn_versions(["9.1.0.70"])
    text = clean.text("node7 node7.example.org 192.168.1.7 fe80::1:2:3 abcd-1234 SECRET_X=v "
                      "127.0.0.1 c10d::ProcessGroup cudnn 9.1.0.70 at 19:27:28 /usr/bin")
    assert "node7" not in text and "192.168.1.7" not in text and "abcd-1234" not in text
    assert "SECRET_X=<redacted>" in text and "fe80::1:2:3" not in text
    assert "127.0.0.1" in text and "c10d::ProcessGroup" in text and "9.1.0.70" in text and "19:27:28" in text
    assert "/usr/bin" in text  # only secret-looking names hide their values
    assert clean.env({"NCCL_IB_KEY": "k", "MASTER_ADDR": "192.168.1.7"}) == {"NCCL_IB_KEY": "<redacted>",
                                                                           "MASTER_ADDR": "addr-1"}


def test_a_log_cannot_close_its_code_fence():
    assert fence("plain") == "```"
    assert fence("a ```` b") == "`````"


@pytest.mark.integration
def test_a_day_of_samples_keeps_the_file_small(hung_record):
    rows = [{"t": 1767225600.0 + i, "host": {"cpu_pct": 50.0},
             "gpus": [{"index": g, "name": "NVIDIA H200", "util_pct": i % 100, "mem_used_mib": 4000,
                       "power_w": 300.0 + i % 50, "temp_c": 50} for g in range(8)],
             "ranks": {str(r): {"pid": 100 + r, "cpu_pct": 99.0, "rss_mib": 900.0} for r in range(8)}}
            for i in range(0, 86400, 40)]  # a day of an 8-GPU node, every 40th second: 5× the points a line keeps
    (hung_record.path / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    html = to_html(build(hung_record, doctor="none"))
    assert len(html.encode()) < 5 * 1024 * 1024
    assert html.count('id="series-GPU-') == 4 * 8  # every GPU in each of the four GPU charts


def test_a_broken_record_still_gives_a_report_that_says_so(tmp_path):
    record = RunRecord.create("broken", root=tmp_path)
    (record.path / "meta.json").write_text('{"run_id": "x", "world_')
    os.mkfifo(record.path / "logs" / "rank0.stderr.log")  # never opened to wait
    html = to_html(build(record, doctor="none"))
    assert "meta.json" in html and "what follows comes from the other files" in html
    assert "No known failure" in html or "Diagnosis" in html
    assert "Describe the bug" in to_markdown(build(record, doctor="none"))


def test_the_report_is_english_while_the_app_speaks_chinese(hung_record, tmp_path):
    """A report is a record written for a maintainer: its words stay English whatever the app shows."""
    from mgtutor.training.foundation.i18n import current_language, set_language

    english = write_report(hung_record, tmp_path / "en.md", markdown=True, doctor="saved").read_text()
    set_language("zh")
    chinese_app = write_report(hung_record, tmp_path / "zh.md", markdown=True, doctor="saved").read_text()
    assert current_language() == "zh"  # the app's language is left as it was
    assert not re.search(r"[\u4e00-\u9fff]", chinese_app)
    assert chinese_app.count("\n") == english.count("\n")
