"""The Flight Recorder side of hang forensics: the ranks' variables, the dump pipe, the reader.

tests/data/fr_gloo/ holds dumps written by torch itself (`_dump_fr_trace`, gloo, 2 ranks, rank 1
skipped the third all_reduce; paths replaced). The integration test makes fresh ones the same way, its two real
torch ranks started by the stand-in torchrun (the dumps are the ranks' own; torchrun's agent would add an
`import torch`). Fresh dumps asked for by mgtutor's stack hook from ranks torchrun started:
test_hang_cli.py::test_skipped_all_reduce_names_rank_1_and_both_lines.
NCCL's own dump (on timeout, or through the pipe) is exercised in tests/gpu/test_hang_gpu.py.
"""
from __future__ import annotations

import os
import pickle
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

from conftest import STANDIN_ARGV, no_gpu_env
from mgtutor.diagnostics.failures.hang.analyse import analyse_capture
from mgtutor.diagnostics.failures.hang.flight_recorder import first_divergence, flight_lines, pending, read_dumps
from mgtutor.training.runs.forensics.flight import flight_env, request_dump
from mgtutor.training.runs.launch.launcher import free_port
from mgtutor.training.runs.records.record import RunRecord

DATA = Path(__file__).parent / "data"


def test_reader_finds_each_ranks_last_collective_and_the_divergence():
    ranks = read_dumps(DATA / "fr_gloo")
    assert sorted(ranks) == [0, 1]
    assert ranks[0].last_entered.seq == 3 and ranks[0].last_completed == 2
    assert ranks[1].last_entered.seq == 2 and ranks[1].last_completed == 2
    assert ranks[0].last_entered.op == "all_reduce" and ranks[0].last_entered.sizes == [[256]]
    assert ranks[0].last_entered.where == "fr_dump_gloo.py:21"
    divergence = first_divergence(ranks)
    assert divergence.seq == 3 and divergence.missing == [1] and list(divergence.entered) == [0]
    lines = flight_lines(ranks)
    assert lines[0].startswith("rank 0: last entered #3 all_reduce [[256]] at fr_dump_gloo.py:21")
    assert lines[-1] == ("first divergence at collective #3: rank 0 ran all_reduce [[256]] at fr_dump_gloo.py:21; "
                         "rank 1 never reached it")
    assert list(pending(ranks)) == [0]


def test_flight_recorder_turns_a_gpu_wait_into_the_collective(tmp_path):
    """On NCCL rank 0's Python thread waits in synchronize/.item(); FR says it is all_reduce #3."""
    capture = tmp_path / "cap"
    shutil.copytree(DATA / "hang" / "slow-loader-auto", capture)
    text = (capture / "rank0.txt").read_text().replace("    all_reduce (", "    synchronize (")
    (capture / "rank0.txt").write_text(text.replace("/torch/distributed/distributed_c10d.py", "/torch/cuda/__init__.py", 1))
    report = analyse_capture(capture, world_size=2, flight=read_dumps(DATA / "fr_gloo"))
    assert report.kind == "rank_outside_collective" and report.ranks == [1]
    assert report.where[0].where.op == "all_reduce #3, called at fr_dump_gloo.py:21"
    assert "first divergence at collective #3" in report.summary
    assert any(line.startswith("rank 1: last entered #2") for line in report.flight)


def test_refuses_pickles_that_name_code(tmp_path):
    folder = tmp_path / "fr"
    folder.mkdir()
    (folder / "rank_0").write_bytes(pickle.dumps({"entries": [len]}))
    (folder / "rank_1").write_bytes(b"\x80\x04not a pickle")
    ranks = read_dumps(folder)
    assert "refused: the dump names builtins.len" in ranks[0].problem
    assert ranks[1].problem.startswith("unreadable Flight Recorder dump rank_1")
    assert flight_lines(ranks)[0].startswith("rank 0: unreadable") and first_divergence(ranks) is None


def test_ranks_get_the_variables_and_keep_the_users_own(tmp_path):
    record = RunRecord(tmp_path)
    env = flight_env(record, {"TORCH_NCCL_TRACE_BUFFER_SIZE": "50"})
    assert "TORCH_NCCL_TRACE_BUFFER_SIZE" not in env and env["TORCH_FR_BUFFER_SIZE"] == "2000"
    assert env["TORCH_NCCL_DUMP_ON_TIMEOUT"] == "1"
    assert env["TORCH_FR_DUMP_TEMP_FILE"] == env["TORCH_NCCL_DEBUG_INFO_TEMP_FILE"] == str(tmp_path / "fr" / "rank_")
    assert env["TORCH_NCCL_DEBUG_INFO_PIPE_FILE"] == str(tmp_path / "fr" / "pipe_rank_")
    assert (tmp_path / "fr").is_dir()
    gloo = flight_env(record, {}, backend="gloo")
    assert sorted(gloo) == ["TORCH_FR_BUFFER_SIZE", "TORCH_FR_DUMP_TEMP_FILE"]  # no deprecated NCCL names


def test_dump_request_through_a_pipe_and_what_is_missing(tmp_path):
    """A reader stands in for rank 0's NCCL heartbeat monitor (it reads the FIFO and writes the dump)."""
    record = RunRecord(tmp_path)
    flight_env(record)
    pipe = tmp_path / "fr" / "pipe_rank_0.pipe"
    os.mkfifo(pipe)
    fd = os.open(pipe, os.O_RDONLY | os.O_NONBLOCK)  # as ProcessGroupNCCL's DumpPipe opens it
    stale = tmp_path / "fr" / "pipe_rank_2.pipe"
    os.mkfifo(stale)  # a pipe nobody reads: the rank's monitor is gone

    def monitor() -> None:
        while True:
            try:
                if os.read(fd, 128):
                    break
            except BlockingIOError:
                pass
            threading.Event().wait(0.05)
        shutil.copy(DATA / "fr_gloo" / "rank_0", tmp_path / "fr" / "rank_0")

    thread = threading.Thread(target=monitor, daemon=True)
    thread.start()
    request = request_dump(record, {0: None, 1: None, 2: None}, wait_s=5.0)
    thread.join(5)
    os.close(fd)
    assert request.asked == [0] and request.dumped == [0]
    assert any(p.startswith("rank 1: no Flight Recorder pipe (no NCCL group yet, and the stack hook is not")
               for p in request.problems)
    assert any(p.startswith("rank 2: cannot write its dump pipe: nobody reads it") for p in request.problems)


@pytest.mark.integration
def test_fresh_dumps_from_real_gloo_ranks(tmp_path):
    env = dict(no_gpu_env(), FR_DIR=str(tmp_path), TORCH_FR_BUFFER_SIZE="2000")
    proc = subprocess.run([*STANDIN_ARGV, "--nproc-per-node", "2",
                           "--rdzv-endpoint", f"127.0.0.1:{free_port()}", str(DATA / "fr_dump_gloo.py")],
                          env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-2000:]
    ranks = read_dumps(tmp_path)
    divergence = first_divergence(ranks)
    assert divergence is not None and divergence.seq == 3 and divergence.missing == [1]
    assert divergence.entered[0].where == "fr_dump_gloo.py:21"
