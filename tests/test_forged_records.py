"""Forged run records never break a command or the TUI (issue 46, items 9 and 10): each forgery of the
hostile tester's, beside a good run, through every command that reads records (`runs`, `runs --json`,
`runs show`, `runs show --json`, `diagnose`, `report`, `report --markdown`, `runs attach`) in-process, and
through the TUI's Runs screen. A record that cannot be read is listed with the reason, never hiding the
others; nothing a record says reaches the terminal as an escape sequence."""
from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from textual.widgets import DataTable

from mgtutor.training.runs.events.reader import EventReader
from mgtutor.training.runs.follow.heartbeats import live_watchers
from mgtutor.training.runs.launch.launcher import LaunchSpec, launch
from mgtutor.training.runs.records.record import RunRecord, list_runs, write_json_atomic
from mgtutor.tui.cli import main as cli_main
from mgtutor.tui.screens.monitor import MonitorScreen
from tests.helpers import wait_for, wait_for_app
from tests.monitor_helpers import make_app
from tests.test_records_hostile import good_run
from tests.test_report import fonts_listed  # noqa: F401 - matplotlib lists the fonts (a process) before the tests
from tests.unprivileged import without_dac_override

pytestmark = pytest.mark.timeout(180)

OSC52 = "\x1b]52;c;aGVsbG8=\x07"  # sets the clipboard of the terminal that prints it
MATHTEXT = "$\\frac{a}{$"  # matplotlib would parse it as a formula, and fail


def _write(record: RunRecord, name: str, text: str) -> None:
    (record.path / name).write_text(text)


def _samples(record: RunRecord, gpu: dict) -> None:
    rows = [{"t": 1.7e9 + i, "gpus": [dict(gpu, index=0)], "ranks": {"0": {"pid": 7, "cpu_pct": gpu.get("util_pct"),
                                                                           "rss_mib": 1e308}}} for i in range(3)]
    _write(record, "samples.jsonl", "".join(json.dumps(row) + "\n" for row in rows))


def _events(record: RunRecord, *lines: str) -> None:
    _write(record, "events.jsonl", "".join(line + "\n" for line in lines))


def _self_link(record: RunRecord) -> None:
    (record.path / "meta.json").unlink()
    os.symlink("meta.json", record.path / "meta.json")


def _oversized_ranks(record: RunRecord) -> None:
    """A result.json of 5.9 MB, over the 4 MiB that mgtutor reads of one (MAX_RECORD_BYTES)."""
    ranks = ",".join(f'{{"rank":{i},"exit_code":1}}' for i in range(200_000))
    _write(record, "result.json", f'{{"status":"failed","ranks":[{ranks}]}}')


def _osc52(record: RunRecord) -> None:
    record.update_meta(target=[f"{OSC52}train.py"], label=OSC52, backend=f"{OSC52}[/]", host=OSC52, cwd=OSC52,
                       device_note=OSC52, devices=[{"index": 0, "name": OSC52}])
    write_json_atomic(record.path / "result.json", {
        "status": "failed", "backend": OSC52, "first_failure": {"rank": 0, "signal": OSC52},
        "ranks": [{"rank": 0, "signal": OSC52, "outcome": OSC52, "ended": 1.7e9 + 1}]})
    _events(record, json.dumps({"rank": 0, "t": 1.7e9, "type": "error", "message": OSC52, "exception": OSC52}))


NESTED = "[" * 100_000 + "]" * 100_000


def _nested_everywhere(record: RunRecord) -> None:
    """Every other JSON file of a run nested 100,000 deep: samples, a stack capture's index, a memory
    summary (with the OOM that makes diagnose read it), a heartbeat, a rank's exit record."""
    _write(record, "samples.jsonl", NESTED + "\n")
    capture = record.path / "stacks" / "20260101-000000-1-hang"
    capture.mkdir(parents=True)
    (capture / "index.json").write_text(NESTED)
    (capture / "rank0.txt").write_text("Thread 1 (idle)\n")
    for folder, name in (("memory", "rank0.json"), ("watchers", "1-1.json"), ("ranks", "rank0.json")):
        (record.path / folder).mkdir(exist_ok=True)
        (record.path / folder / name).write_text(NESTED)
    _write(record, "logs/rank0.stderr.log", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")


LOSS_400_DIGITS = '{"rank": 0, "t": 1700000001, "type": "step", "step": 1, "loss": ' + "9" * 400 + "}"
STEP = '{"rank": 0, "t": 1700000002, "type": "step", "step": 2, "loss": 0.5}'

# name: (forge the good record, what the listing says of it; None: it reads whole)
FORGERIES: dict[str, tuple[Callable[[RunRecord], object], str | None]] = {
    "meta.json nested 100,000 deep": (
        lambda r: _write(r, "meta.json", '{"env": ' + "[" * 100_000 + "]" * 100_000 + "}"), "nested deeper than 64"),
    "a world size of 400 digits": (
        lambda r: _write(r, "meta.json", '{"world_size": ' + "9" * 400 + "}"), "an integer of 400 digits"),
    "started NaN": (lambda r: _write(r, "meta.json", '{"started": NaN}'), "NaN is not a JSON number"),
    "started Infinity": (lambda r: _write(r, "meta.json", '{"started": Infinity}'), "Infinity is not a JSON number"),
    "started 1e300": (lambda r: r.update_meta(started=1e300), "started is 1e+300"),
    "a world size of 1e9 and no result": (
        lambda r: (r.update_meta(world_size=1e9), (r.path / "result.json").unlink()), "world_size is 1000000000.0"),
    "200,000 rank entries": (_oversized_ranks, "result.json is larger than 4 MiB"),
    "every other JSON file nested 100,000 deep": (_nested_everywhere, None),
    "a 400-digit loss in an event": (lambda r: _events(r, LOSS_400_DIGITS, STEP), None),
    "a GPU name in mathtext": (lambda r: (r.update_meta(devices=[{"index": 0, "name": MATHTEXT}]),
                                          _samples(r, {"name": MATHTEXT, "util_pct": 50.0})), None),
    "sample values of 1e308": (lambda r: _samples(r, {"name": "gpu", "util_pct": 1e308, "mem_used_mib": -1e308,
                                                      "power_w": 1e308, "temp_c": 1e308}), None),
    "meta.json a symlink to itself": (_self_link, "Too many levels of symbolic links"),
    "result.json of mode 000": (lambda r: os.chmod(r.path / "result.json", 0), "result.json is unreadable"),
    "an OSC 52 escape in the target": (_osc52, "first_failure.signal is '\\x1b]52"),  # said as repr says it
}


# opened in the Monitor too (each takes seconds there): the records that cannot be read whole
OPENED = ("meta.json nested 100,000 deep", "meta.json a symlink to itself", "200,000 rank entries",
          "an OSC 52 escape in the target")


def forge(name: str) -> RunRecord:
    record = good_run("forged")
    FORGERIES[name][0](record)
    return record


def _mode_000_applies(path: Path) -> bool:
    """Whether mode 000 stops this thread (also as root: without_dac_override), so the case is not vacuous."""
    try:
        path.read_bytes()
    except PermissionError:
        return True
    return False


def commands(record: RunRecord, tmp_path: Path) -> dict[str, list[str]]:
    run_id = record.run_id
    return {"runs": ["runs"], "runs --json": ["runs", "--json"], "runs show": ["runs", "show", run_id],
            "runs show --json": ["runs", "show", run_id, "--json"], "diagnose": ["diagnose", run_id],
            "report": ["report", run_id, "--doctor", "none", "-o", str(tmp_path / "report.html")],
            "report --markdown": ["report", run_id, "--doctor", "none", "--markdown", "-o", str(tmp_path / "issue.md")],
            "runs attach": ["runs", "attach", run_id]}


@pytest.mark.parametrize("name", list(FORGERIES))
def test_every_command_reads_a_forged_record_without_a_crash_or_an_escape(
        name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")
    other = good_run("other")
    record = forge(name)
    said: dict[str, tuple[int, str, str]] = {}
    with without_dac_override():
        assert name != "result.json of mode 000" or _mode_000_applies(record.path / "result.json")
        for what, argv in commands(record, tmp_path).items():
            code = cli_main(argv)  # a crash is an exception here: the test fails with its traceback
            out, err = capsys.readouterr()
            said[what] = (code, out, err)
    for what, (code, out, err) in said.items():
        assert "\x1b" not in out + err and "\x07" not in out + err, (what, out, err)
        assert "Traceback" not in err, (what, err)
        assert code in (0, 1, 2) if what == "runs attach" else code == 0, (what, code, err)
    listing = said["runs"][1]
    assert other.run_id in listing and record.run_id in listing
    listed = {run["id"]: run for run in json.loads(said["runs --json"][1])}
    assert listed[other.run_id]["status"] == "finished" and "problem" not in listed[other.run_id]
    reason = FORGERIES[name][1]
    if reason:
        assert reason in listing and reason in listed[record.run_id]["problem"], (listing, listed[record.run_id])
        assert reason in said["runs show"][1] and reason in json.loads(said["runs show --json"][1])["problem"]
    else:
        assert "problem" not in listed[record.run_id], listed[record.run_id]
    assert (tmp_path / "report.html").stat().st_size > 0 and (tmp_path / "issue.md").stat().st_size > 0


def test_a_400_digit_loss_is_one_skipped_line_and_the_next_step_is_read() -> None:
    record = forge("a 400-digit loss in an event")
    reader = EventReader(record.events_path)
    events = reader.read_all()
    assert [e.step for e in events] == [2] and reader.skipped == 1


def test_a_gpu_name_in_mathtext_is_drawn_as_text_in_the_report(tmp_path: Path) -> None:
    record = forge("a GPU name in mathtext")
    assert cli_main(["report", record.run_id, "--doctor", "none", "-o", str(tmp_path / "r.html")]) == 0
    html = (tmp_path / "r.html").read_text()
    assert 'id="chart-gpu_util"' in html and "\\frac{a}{" in html


@pytest.mark.integration
async def test_the_runs_screen_lists_every_forged_record_with_its_reason_and_opens_the_unreadable_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")
    good = good_run("good")
    forged = {name: forge(name) for name in FORGERIES}
    with without_dac_override():
        app = make_app()
        async with app.run_test(size=(160, 50)) as pilot:
            await pilot.press("r")
            table = pilot.app.screen.query_one("#runs-table", DataTable)
            await wait_for_app(pilot, lambda: table.row_count == len(forged) + 1, 60, what="every run listed")
            rows = {r.run_id: [str(cell) for cell in table.get_row(r.run_id)] for r in [good, *forged.values()]}
            for name in OPENED:  # these open in the Monitor, replayed from their files, and back
                table.move_cursor(row=table.get_row_index(forged[name].run_id))
                table.focus()
                await pilot.press("enter")
                await wait_for_app(pilot, lambda: isinstance(pilot.app.screen, MonitorScreen)
                                   and pilot.app.screen.record is not None
                                   and pilot.app.screen.record.run_id == forged[name].run_id, 10, what=name)
                await pilot.pause(0.3)  # the follow thread reads the run's files meanwhile
                await pilot.press("r")
                table = pilot.app.screen.query_one("#runs-table", DataTable)
                await wait_for_app(pilot, lambda: table.row_count == len(forged) + 1, 30, what="back in Runs")
            await pilot.press("q")
            await wait_for_app(pilot, lambda: not app.is_running, 30, what="q to quit")
    assert app.return_code in (0, None)
    assert rows[good.run_id][1] == "finished"
    for name, record in forged.items():
        reason = FORGERIES[name][1]
        row = " ".join(rows[record.run_id])
        failed_first = rows[record.run_id][5] == "rank 0"  # the column names who failed first, not the reason
        assert "\x1b" not in row and "\x07" not in row and (reason is None or reason in row or failed_first), (name, row)


LIVE_SCRIPT = f"""import os, pathlib, sys, time
flag = pathlib.Path(sys.argv[1])
print("ready", flush=True)
while not flag.exists():
    time.sleep(0.05)
with open(pathlib.Path(os.environ["MGTUTOR_RUN_DIR"]) / "events.jsonl", "a") as events:
    events.write({LOSS_400_DIGITS!r} + "\\n" + {STEP!r} + "\\n")
time.sleep(1.0)  # the follower polls the bad line while the run goes on
print("after the bad line", flush=True)
"""


@pytest.mark.integration
def test_a_400_digit_loss_in_a_live_run_is_skipped_by_mgtutor_run(write_script, tmp_path: Path, standin_torchrun,
                                                                    capsys: pytest.CaptureFixture[str],
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 46 item 10: the line killed the follower and left the ranks running with nobody following."""
    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")
    flag = tmp_path / "write-now"
    flag.touch()
    code = cli_main(["run", "--nproc", "1", "--", str(write_script("live.py", LIVE_SCRIPT)), str(flag)])
    out, err = capsys.readouterr()
    (record,) = list_runs()
    followed_to_the_end(record, code, out, err)


def followed_to_the_end(record: RunRecord, code: int, out: str, err: str) -> None:
    """The follower outlived the bad line: the run's end (a second after it) is said, and nothing crashed."""
    assert code == 0 and "run finished in" in err and "Traceback" not in out + err, (out, err)
    assert "after the bad line" in record.rank_log(0, "stdout").read_text()
    reader = EventReader(record.events_path)
    assert [e.step for e in reader.read_all()] == [2] and reader.skipped == 1


@pytest.mark.integration
def test_a_400_digit_loss_in_a_live_run_is_skipped_by_runs_attach(write_script, tmp_path: Path, standin_torchrun,
                                                                    capsys: pytest.CaptureFixture[str],
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")
    flag = tmp_path / "write-now"
    run = launch(LaunchSpec(target=[str(write_script("live.py", LIVE_SCRIPT)), str(flag)], nproc=1, backend="gloo"))
    attached = threading.Event()

    def write_once_attached() -> None:  # the bad line comes while `runs attach` follows the run
        wait_for(lambda: live_watchers(run.record), 60, what="the attached heartbeat")
        attached.set()
        flag.touch()

    helper = threading.Thread(target=write_once_attached, daemon=True)
    helper.start()
    try:
        code = cli_main(["runs", "attach", run.record.run_id])
    finally:
        flag.touch()
        run.wait(60)  # the supervisor is this test's child: reap it
    out, err = capsys.readouterr()
    assert attached.is_set(), (code, out, err)  # attach ended before it followed (seen once, under a profiled suite)
    followed_to_the_end(run.record, code, out, err)
