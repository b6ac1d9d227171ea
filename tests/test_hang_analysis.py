"""Hang analysis on stacks recorded from real hung runs (lesson 14's hang.py, 2 gloo ranks).

tests/data/hang/<mode>-<method>/ are captures taken by training/runs/forensics/stacks.py from real runs, by
py-spy ("auto") and by the faulthandler hook ("signal"); only the machine's paths were replaced.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from mgtutor.diagnostics.failures.catalogue import load_catalogue
from mgtutor.diagnostics.failures.hang.analyse import analyse_capture, explain
from mgtutor.diagnostics.failures.hang.stack_dumps import is_user_file, locate, parse_dump, parse_rank_file

DATA = Path(__file__).parent / "data" / "hang"
METHODS = ["auto", "signal"]


@pytest.mark.parametrize("method", METHODS)
def test_world_size_override_is_named_with_the_init_line(method):
    report = analyse_capture(DATA / f"world-size-{method}", world_size=2)
    assert report.kind == "world_size_mismatch"
    assert report.ranks == [0, 1]
    assert report.summary.startswith("2 ranks started, they wait for ")
    # py-spy reads init_process_group's own world_size argument; the signal hook has no locals
    assert ("they wait for 3 " if method == "auto" else "they wait for more than 2") in report.summary
    assert "hang.py:38 in setup" in report.summary
    assert "torchrun set the world size" in report.fix
    assert {w.where.frame.line for w in report.where.values()} == {38}


def test_one_rank_that_waits_for_a_second_is_spoken_of_as_one(tmp_path):
    capture = tmp_path / "capture"
    shutil.copytree(DATA / "world-size-auto", capture)
    (capture / "rank1.txt").unlink()
    report = analyse_capture(capture, world_size=1)
    assert report.kind == "world_size_mismatch" and report.ranks == [0]
    assert report.summary.startswith("1 rank started, it waits for 3 in init_process_group")


@pytest.mark.parametrize("method", METHODS)
def test_skipped_all_reduce_names_each_ranks_op_and_line(method):
    report = analyse_capture(DATA / f"skip-allreduce-{method}", world_size=2)
    assert report.kind == "collective_mismatch"
    assert report.ranks == [1] or report.ranks == [0]  # two groups of one: the odd one is either
    assert "rank 0 waits in all_reduce at hang.py:48" in report.summary
    assert "rank 1 waits in barrier at hang.py:50" in report.summary


@pytest.mark.parametrize("method", METHODS)
def test_stuck_data_loader_names_rank_1_and_its_worker(method):
    report = analyse_capture(DATA / f"slow-loader-{method}", world_size=2)
    assert report.kind == "rank_outside_collective"
    assert report.ranks == [1]
    rank1 = report.where[1]
    assert rank1.where.category == "data" and rank1.where.frame.line == 56
    assert rank1.worker is not None and rank1.worker.frame.short_name == "__getitem__"
    assert rank1.worker.frame.line == 30
    assert report.where[0].where.op == "all_reduce" and report.where[0].where.frame.line == 58
    assert "Rank 1 is in its data loading (DataLoader at hang.py:56" in report.summary
    text = report.text()
    assert "* rank 1: waits for its DataLoader at hang.py:56 in slow_loader; worker" in text


def test_finding_carries_where_and_stack_paths():
    report = analyse_capture(DATA / "slow-loader-auto", world_size=2)
    data = report.finding().to_dict()
    assert data["kind"] == "rank_outside_collective" and data["rank"] == 1
    assert data["where"]["1"]["line"] == 56 and data["where"]["1"]["function"] == "slow_loader"
    assert data["where"]["1"]["worker"]["function"] == "__getitem__"
    assert data["where"]["0"]["file"].endswith("hang.py")
    assert set(data["stacks"]) == {"0", "1"} and all(Path(p).is_file() for p in data["stacks"].values())
    assert data["lesson"] == load_catalogue()["rank_outside_collective"].lesson


def test_py_spy_and_faulthandler_texts_give_the_same_frames():
    pyspy = parse_rank_file((DATA / "slow-loader-auto" / "rank0.txt").read_text())
    hook = parse_rank_file((DATA / "slow-loader-signal" / "rank0.txt").read_text())
    main_a, main_b = pyspy[0].main_thread(), hook[0].main_thread()
    assert [(f.file, f.line) for f in main_a.frames] == [(f.file, f.line) for f in main_b.frames]
    assert [f.short_name for f in main_a.frames] == [f.short_name for f in main_b.frames]
    assert [p.role for p in pyspy] == ["main", "worker", "worker"]


def test_a_rank_without_a_stack_is_reported_not_guessed(tmp_path):
    capture = tmp_path / "cap"
    shutil.copytree(DATA / "slow-loader-auto", capture)
    (capture / "rank1.txt").write_text("=== process 99 (rank 1, main) via none ===\n(no stack: py-spy: no ptrace rights)\n")
    index = json.loads((capture / "index.json").read_text())
    index["missing"] = ["rank 1 main process 99: py-spy: no ptrace rights"]
    (capture / "index.json").write_text(json.dumps(index))
    report = analyse_capture(capture, world_size=2)
    assert report.kind is None
    assert "no stack (py-spy: no ptrace rights)" in report.text()
    assert report.missing == ["rank 1 main process 99: py-spy: no ptrace rights"]


def test_an_exited_rank_is_outside_the_collective(tmp_path):
    capture = tmp_path / "cap"
    capture.mkdir()
    shutil.copy(DATA / "slow-loader-auto" / "rank0.txt", capture / "rank0.txt")
    (capture / "index.json").write_text(json.dumps({"missing": ["rank 1: exited (exit code 0) before the capture"]}))
    report = analyse_capture(capture, world_size=2)
    assert report.kind == "rank_outside_collective" and report.ranks == [1]
    assert report.summary.startswith("Rank 1 has finished (exit code 0) while rank 0 waits in all_reduce")
    assert "uneven batch counts" in report.fix


def test_every_rank_in_the_same_call_has_no_culprit():
    report = analyse_capture(DATA / "slow-loader-auto", world_size=2)
    same = explain({0: report.where[0], 1: report.where[0]}, 2)
    assert same.kind is None and same.ranks == [] and "every rank waits in all_reduce" in same.summary


def test_nccl_ranks_in_communicator_setup_wait_for_a_rank_never_started():
    """A real capture (one H200, `mgtutor run --nproc 1`): the script raised WORLD_SIZE, NCCL's lazy
    init_process_group returned at once, and the first all_reduce waits in NCCL's bootstrap."""
    report = analyse_capture(DATA / "world-size-nccl-lazy", world_size=1)
    assert report.where[0].where.comm_setup and report.where[0].where.op == "all_reduce"
    assert report.kind == "world_size_mismatch" and report.ranks == [0]
    assert report.summary.startswith("1 rank started, it waits for more than 1 in all_reduce, where NCCL sets up "
                                     "its communicator (ws_lazy.py:8 in <module>)")
    assert "NCCL sets up its communicator: every peer must join" in report.text()
    elsewhere = analyse_capture(DATA / "world-size-nccl-lazy", world_size=2)  # rank 1 on another node
    assert elsewhere.kind is None and "NCCL_SOCKET_IFNAME" in elsewhere.fix


def test_a_rank_in_communicator_setup_while_its_peer_loads_data_names_the_loader():
    setup = analyse_capture(DATA / "world-size-nccl-lazy", world_size=1).where[0]
    loader = analyse_capture(DATA / "slow-loader-auto", world_size=2).where[1]
    report = explain({0: setup, 1: loader}, 2)
    assert report.kind == "rank_outside_collective" and report.ranks == [1]
    assert "rank 0 waits in all_reduce" in report.summary and report.summary.startswith("Rank 1 is in its data loading")


def test_without_native_frames_a_collective_is_not_taken_for_setup():
    text = (DATA / "world-size-nccl-lazy" / "rank0.txt").read_text()
    python_only = "\n".join(line for line in text.splitlines() if "[native]" not in line)
    (thread,) = [t for t in parse_rank_file(python_only)[0].threads if t.is_main]
    assert not locate(thread).comm_setup and locate(thread).op == "all_reduce"


def test_every_rank_waiting_for_the_gpu_is_not_called_the_same_collective():
    rank0 = analyse_capture(DATA / "slow-loader-auto", world_size=2).where[0]
    rank0.where.category, rank0.where.op = "gpu", "the GPU (a pending NCCL collective?)"
    report = explain({0: rank0}, 1)
    assert report.kind is None and report.summary.startswith("every rank waits for the GPU at hang.py:")
    assert "Flight Recorder" in report.summary


def test_parser_ignores_garbage_and_partial_dumps():
    assert parse_dump("") == [] and parse_rank_file("nonsense\n\x00\xff") == []
    threads = parse_dump('Current thread 0x1 (most recent call first):\n  File "/x/a.py", line 3 in f\n  File "/x/a')
    assert len(threads) == 1 and threads[0].frames[0].line == 3
    assert locate(None).category == "no stack"


def test_user_files_exclude_python_and_packages():
    assert is_user_file("/home/u/train.py")
    assert not is_user_file("/usr/lib/python3.11/threading.py")
    assert not is_user_file("/opt/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py")
    assert not is_user_file("<frozen importlib._bootstrap>")
    assert is_user_file("/opt/venv/lib/python3.11/site-packages/mgtutor/diagnostics/failures/demo_workers.py")
