"""The unreachable rendezvous store from the lines torch prints while it retries (a held-out log of a real
torch 2.14 run), or from the stacks of a silent hang (a real capture: each rank waits for its mp.spawn
children, which wait for the store), live and afterwards, with the script's lines that set the address: a
store that answers after a retry is no warning, and a run that finished is not diagnosed with it."""
from __future__ import annotations

import shutil
import socket
from pathlib import Path

from mgtutor.diagnostics.failures.classify import diagnose_files, diagnose_run
from mgtutor.diagnostics.failures.hang.analyse import analyse_capture
from mgtutor.diagnostics.failures.hang.watch import is_hang
from mgtutor.diagnostics.failures.store_watch import READ_LIMIT, StoreWatch
from mgtutor.training.runs.records.record import RunRecord
from mgtutor.training.runs.records.types import RunMeta, RunResult

LOGS = Path(__file__).parent / "data" / "logs"
SCRIPT = Path(__file__).parent / "data" / "run_failures" / "spawn_under_torchrun" / "train.py"
RETRY = ("[W1206 07:39:32.495411839 TCPStore.cpp:340] [c10d] TCP client failed to connect/validate to host "
         "127.0.0.1:12355 - retrying (try={n}, timeout=1800000ms, delay=685ms): Connection reset by peer\n")


def spawn_run(tmp_path: Path, status: str = "stopped") -> RunRecord:
    (tmp_path / "train.py").write_text(SCRIPT.read_text())
    record = RunRecord.create("train-py", root=tmp_path / "runs")
    record.write_meta(RunMeta.from_json({"target": ["train.py"], "cwd": str(tmp_path), "backend": "gloo",
                                         "world_size": 2, "nproc_per_node": 2}))
    record.write_result(RunResult.from_json({"run_id": record.run_id, "status": status}))
    return record


def write_log(record: RunRecord, rank: int, text: str) -> None:
    with open(record.path / "logs" / f"rank{rank}.stderr.log", "a") as log:
        log.write(text)


def line_of(text: str) -> int:
    return next(n for n, line in enumerate(SCRIPT.read_text().splitlines(), 1) if text in line)


def test_the_retrying_client_of_a_real_run_is_an_unreachable_store():
    findings = diagnose_files([LOGS / "rendezvous_unreachable_retrying.log"])
    assert findings[0].kind == "rendezvous_unreachable"
    assert "the rendezvous store at 127.0.0.1:29881" in findings[0].summary


def test_the_warning_waits_for_a_second_retry_then_names_every_rank_and_the_scripts_lines(tmp_path):
    record = spawn_run(tmp_path)
    watch = StoreWatch(record)
    write_log(record, 0, RETRY.format(n=0))
    write_log(record, 1, "frame #0: c10::Error::Error\n" + RETRY.format(n=0) + RETRY.format(n=1))
    assert watch.poll(None, 0.0) == []  # a rank 0 still starting answers within a try or two
    write_log(record, 1, RETRY.format(n=2))
    [alert] = watch.poll(None, 1.0)
    assert alert.kind == "rendezvous_unreachable" and alert.ranks == (0, 1)
    assert alert.message.startswith("Ranks 0, 1 cannot reach the rendezvous store at 127.0.0.1:12355")
    assert "torch retries until its timeout (1800 s)" in alert.message
    assert f"train.py:{line_of('MASTER_ADDR')}" in alert.message and f"mp.spawn (train.py:{line_of('mp.spawn(')})" \
        in alert.message
    assert watch.poll(None, 2.0) == [alert]  # it holds while the run goes


def test_a_chatty_log_is_skipped_over_to_its_newest_lines(tmp_path):
    record = spawn_run(tmp_path)
    watch = StoreWatch(record)
    write_log(record, 0, "x" * (3 * READ_LIMIT) + "\n" + RETRY.format(n=5))
    [alert] = watch.poll(None, 0.0)
    assert alert.ranks == (0,)


def test_diagnose_names_the_store_and_the_scripts_lines_of_a_stopped_run(tmp_path):
    record = spawn_run(tmp_path)
    write_log(record, 0, RETRY.format(n=0) + RETRY.format(n=4))
    [finding] = [f for f in diagnose_run(record) if f.kind == "rendezvous_unreachable"]
    assert "127.0.0.1:12355" in finding.summary and "TORCHELASTIC_USE_AGENT_STORE" in finding.summary
    assert finding.fix.startswith("Run it the way it starts itself, with plain python (`python train.py`)")


def test_a_run_that_finished_after_a_retry_is_not_diagnosed_with_it(tmp_path):
    record = spawn_run(tmp_path, status="finished")
    write_log(record, 0, RETRY.format(n=0))
    assert all(f.kind != "rendezvous_unreachable" for f in diagnose_run(record))


CAPTURE = Path(__file__).parent / "data" / "hang" / "spawn-store-refused-auto"  # a real run's stall capture


def refusing_port() -> socket.socket:
    """A loopback port that refuses every connection: bound, never listening."""
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    return holder


def test_a_rank_that_waits_for_its_mp_spawn_children_is_where_they_wait():
    report = analyse_capture(CAPTURE, world_size=2)
    assert is_hang(report)
    for rank, where in report.where.items():
        assert where.where.category == "init" and where.where.inner == "_create_c10d_store"
        assert where.describe() == "waits in init_process_group at train.py:16 in setup"
        assert f"rank {rank}, worker" in (CAPTURE / f"rank{rank}.txt").read_text().split(f"=== process {where.pid} ")[1]


def test_a_silent_hang_at_a_store_that_refuses_is_named_live_and_by_diagnose(tmp_path):
    with refusing_port() as holder:
        port = holder.getsockname()[1]
        record = spawn_run(tmp_path)
        script = tmp_path / "train.py"
        script.write_text(script.read_text().replace('"12355"', f'"{port}"'))
        capture = record.path / "stacks" / CAPTURE.name
        shutil.copytree(CAPTURE, capture)
        report = analyse_capture(capture, world_size=2)
        watch = StoreWatch(record)
        watch.saw_hang(report)
        [alert] = watch.poll(None, 0.0)
    assert alert.ranks == (0, 1) and f"cannot reach the rendezvous store at 127.0.0.1:{port}" in alert.message
    [finding] = [f for f in diagnose_run(record) if f.kind == "rendezvous_unreachable"]
    assert finding.ranks == [0, 1] and f"127.0.0.1:{port}" in finding.summary and "mp.spawn" in finding.summary
    assert finding.evidence[0]["text"] == "rank 0: waits in init_process_group at train.py:16 in setup"


def test_a_hang_whose_store_accepts_connections_is_left_to_the_hang_report(tmp_path):
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(4)
        record = spawn_run(tmp_path)
        script = tmp_path / "train.py"
        script.write_text(script.read_text().replace('"12355"', f'"{listener.getsockname()[1]}"'))
        watch = StoreWatch(record)
        watch.saw_hang(analyse_capture(CAPTURE, world_size=2))
        assert watch.poll(None, 0.0) == []


def test_a_progress_bar_that_never_ends_its_line_is_not_kept_whole(tmp_path):
    record = spawn_run(tmp_path)
    watch = StoreWatch(record)
    for _ in range(4):
        write_log(record, 0, "\rstep 1/100 connect" * 10_000)
        assert watch.poll(None, 0.0) == []
    assert max(len(kept) for kept in watch._partial.values()) <= 4096
    write_log(record, 0, "\n" + RETRY.format(n=2))
    assert [a.ranks for a in watch.poll(None, 1.0)] == [(0,)]
