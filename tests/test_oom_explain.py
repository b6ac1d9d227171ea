"""A CUDA OOM explained with numbers, from the real messages in tests/data/logs: the numbers PyTorch
prints, how much must be freed, which ranks share the GPU (from the run record's pids), and the
--memory summary when the rank wrote one."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from mgtutor.diagnostics.failures.classify import diagnose_files, diagnose_run
from mgtutor.diagnostics.failures.oom.explain import GIB, parse_oom
from mgtutor.training.runs.records.record import RankExit, RunRecord

LOGS = Path(__file__).parent / "data" / "logs"
MIB = 1 << 20


def oom_line(name: str) -> str:
    return next(line for line in (LOGS / name).read_text().splitlines() if "out of memory" in line)


def test_the_numbers_of_pytorch_2_messages() -> None:
    n = parse_oom(oom_line("cuda_oom_interleaved.log"))
    assert n is not None and n.gpu == 1 and n.tried == 86 * MIB
    assert n.capacity == int(23.64 * GIB) and n.free == 264 * MIB and n.allocated == int(22.63 * GIB)
    assert n.reserved_unallocated == int(40.11 * MIB) and n.this_process == 23 * GIB + int(0.04 * GIB)
    assert n.outside_pytorch == n.this_process - n.allocated - n.reserved_unallocated
    assert n.must_free == 86 * MIB  # 264 MiB showed free and still could not be used: the whole request


def test_the_numbers_of_the_old_message_and_the_misspelt_one() -> None:
    old = parse_oom(oom_line("cuda_oom_old.log"))
    assert old is not None and old.capacity == 4 * GIB and old.free == 0 and old.allocated == int(3.08 * GIB)
    assert old.reserved_unallocated == int(3.47 * GIB) - int(3.08 * GIB) and old.must_free == 192 * MIB
    typo = parse_oom(oom_line("tee_prefixed_oom.log"))
    assert typo is not None and typo.capacity == 6 * GIB and typo.free == 0


def test_the_diagnosis_says_how_much_to_free_and_by_how_much_to_lower_the_batch() -> None:
    oom = diagnose_files([LOGS / "cuda_oom_shared_gpu.log"])[0]
    assert oom.kind == "cuda_oom" and oom.numbers is not None
    assert "at least 71.7 MiB must be freed" in oom.summary  # 1.25 GiB asked, 1.18 GiB free
    assert oom.numbers["must_free"] == int(1.25 * GIB) - int(1.18 * GIB)
    assert oom.numbers["lower_batch_pct"] == 1
    assert "Lower the per-GPU batch by at least 1 %" in oom.fix and "mgtutor run --memory" in oom.fix
    assert "process 2752205 (not a rank of this run) 40.82 GiB" in oom.summary
    assert json.dumps(oom.to_dict())  # --json carries the numbers
    assert oom.to_dict()["numbers"]["other_processes"] == [{"pid": 2752205, "bytes": int(40.82 * GIB), "rank": None}]


def shared_gpu_run(tmp_path: Path, memory: dict | None = None, stepped: bool = True) -> RunRecord:
    """A run record whose rank 0 is process 2752205, and rank 1's log has the OOM that names it."""
    record = RunRecord(tmp_path / "run")
    (record.path / "logs").mkdir(parents=True)
    (record.path / "ranks").mkdir()
    for rank, pid in ((0, 2752205), (1, 2752206)):
        record.write_rank(RankExit(rank=rank, local_rank=rank, world_size=2, pid=pid, wrapper_pid=pid - 100,
                                   exit_code=1 if rank else -15))
    text = (LOGS / "cuda_oom_shared_gpu.log").read_text().replace("[rank1]: ", "")
    record.rank_log(1, "stderr").write_text(text)
    if stepped:  # a step finished before the OOM (the ranks' hook's event, as `mgtutor run` writes it)
        record.events_path.write_text('{"rank":1,"t":1,"type":"step","step":1,"origin":"hook","step_s":0.5}\n')
    if memory is not None:
        (record.path / "memory").mkdir()
        (record.path / "memory" / "rank1.json").write_text(json.dumps(memory))
    return record


def test_other_processes_on_the_gpu_are_named_as_the_ranks_they_are(tmp_path: Path) -> None:
    oom = next(f for f in diagnose_run(shared_gpu_run(tmp_path)) if f.kind == "cuda_oom")
    assert oom.rank == 1 and "process 2752205 (rank 0) 40.82 GiB" in oom.summary
    assert oom.fix.startswith("Rank 0 also uses this GPU (40.82 GiB)") and "LOCAL_RANK" in oom.fix


def test_with_the_memory_summary_the_batch_cut_is_over_the_activations(tmp_path: Path) -> None:
    memory = {"by_kind": {"parameters": int(10 * GIB), "gradients": int(10 * GIB), "optimizer state": int(20 * GIB),
                          "activations": int(8 * GIB), "other": int(1.63 * GIB)},
              "top_lines": [{"file": "/home/user/train.py", "line": 41, "function": "<module>", "bytes": int(7 * GIB)}],
              "snapshot": "memory/rank1.pickle"}
    oom = next(f for f in diagnose_run(shared_gpu_run(tmp_path, memory)) if f.kind == "cuda_oom")
    assert oom.numbers is not None and oom.numbers["memory"]["top_lines"][0]["line"] == 41
    assert oom.numbers["lower_batch_pct"] == 1 and "over the 8.00 GiB of activations" in oom.fix
    assert "mgtutor run --memory" not in oom.fix  # it was on


@pytest.mark.parametrize("name", ["cuda_oom_interleaved.log", "cuda_oom_old.log", "tee_prefixed_oom.log",
                                  "ansi_oom.log", "cuda_oom_shared_gpu.log"])
def test_every_oom_fixture_keeps_its_kind_and_gets_numbers(name: str) -> None:
    oom = diagnose_files([LOGS / name])[0]
    assert oom.kind == "cuda_oom" and oom.numbers is not None and oom.numbers["tried"]


@pytest.mark.parametrize("memory", [None, {"by_kind": {"activations": int(8 * GIB), "parameters": int(30 * GIB)}}])
def test_an_oom_before_the_first_step_offers_no_percentage_as_the_fix(tmp_path: Path, memory: dict | None) -> None:
    """Issue 43: an OOM in the first forward said "lower the batch by at least 2 %"; 70 % was needed."""
    oom = next(f for f in diagnose_run(shared_gpu_run(tmp_path, memory, stepped=False)) if f.kind == "cuda_oom")
    assert oom.numbers is not None and oom.numbers["lower_bound_weak"] is True
    assert "by at least" not in oom.fix and "only a weak lower bound" in oom.fix
    assert "`mgtutor fit -- SCRIPT ARGS`" in oom.fix and "halve" not in oom.fix  # the one command that finds the batch
    assert "mgtutor run --memory" not in oom.fix
