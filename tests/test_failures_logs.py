"""The classifier over real log texts: every kind, old and new c10d formats, interleaved ranks, healthy logs."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from mgtutor.diagnostics.failures.catalogue import KINDS, load_catalogue
from mgtutor.diagnostics.failures.classify import diagnose_files
from mgtutor.diagnostics.failures.logs.logparse import read_text

LOGS = Path(__file__).parent / "data" / "logs"
LESSONS = {"01-check-gpus", "02-single-gpu-baseline", "03-dataparallel", "04-ddp-torchrun", "05-distributed-sampler",
           "06-rank0-checkpoints", "07-accelerate", "08-batch-lr-scaling", "09-data-loading", "10-mixed-precision",
           "11-torch-compile", "12-watching-a-run", "13-nccl-topology", "14-when-it-goes-wrong", "15-multi-node",
           "16-fsdp"}

# fixture -> (kind named first, its rank)
CASES = {
    "rendezvous_timeout_server.log": ("rendezvous_timeout", None),
    "rendezvous_timeout_gloo_keys.log": ("rendezvous_timeout", 1),
    "rendezvous_unreachable_new.log": ("rendezvous_unreachable", None),
    "rendezvous_unreachable_old.log": ("rendezvous_unreachable", None),
    "port_in_use_libuv.log": ("port_in_use", None),
    "port_in_use_old.log": ("port_in_use", None),
    "nccl_init_timeout.log": ("nccl_init_timeout", 0),
    "cuda_oom_interleaved.log": ("cuda_oom", 1),
    "cuda_oom_old.log": ("cuda_oom", None),
    "tee_prefixed_oom.log": ("cuda_oom", 1),
    "ansi_oom.log": ("cuda_oom", 1),
    "host_oom_killed.log": ("host_oom_killed", 3),
    "nccl_error_remote.log": ("nccl_error", 0),
    "duplicate_gpu.log": ("duplicate_gpu", 1),
    "collective_timeout_nccl.log": ("collective_timeout", 2),
    "collective_timeout_old.log": ("collective_timeout", 1),
    "watchdog_stuck.log": ("watchdog_stuck", 1),
    "ddp_unused.log": ("ddp_unused_parameters", 0),
    "pg_not_initialized.log": ("process_group_not_initialized", None),
    "invalid_device_ordinal.log": ("invalid_device_ordinal", None),
    "collective_mismatch.log": ("collective_mismatch", 1),
    "cuda_driver_too_old.log": ("cuda_driver_too_old", None),
    "no_cuda_driver.log": ("no_cuda_driver", None),
    "nccl_without_gpu.log": ("nccl_without_gpu", 0),
    "shm_exhausted.log": ("shm_exhausted", None),
    "dataloader_worker_killed.log": ("dataloader_worker_killed", None),
    "nan_loss.log": ("nan_loss", 0),
    "child_failed_segv.log": ("child_failed", 2),
    "segfault_faulthandler.log": ("child_failed", 1),  # torch 2.14, 2 gloo ranks, PYTHONFAULTHANDLER=1
    "exit_abort_gloo.log": ("exit_abort", None),  # torch 2.14, 2 gloo ranks, aborted at exit (pytorch#190489)
    # held out from the first catalogue (issue 16 items 4-6, issue 20 item 3)
    "dataset_download_failed.log": ("dataset_download_failed", 0),
    "collective_timeout_dump_signal.log": ("collective_timeout", 2),
    "collective_timeout_norank.log": ("collective_timeout", None),
    "nccl_buffer_oom.log": ("cuda_oom", 1),
    "same_batches_no_sampler.log": ("no_distributed_sampler", 0),
    "shm_exhausted_k8s.log": ("shm_exhausted", 1),
    # torch 2.14, 2 gloo ranks on a machine whose name does not resolve, stopped while they waited (issue 46)
    "hostname_unresolvable.log": ("hostname_unresolvable", None),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_fixture_names_its_cause_first(name: str) -> None:
    kind, rank = CASES[name]
    findings = diagnose_files([LOGS / name])
    assert findings, f"{name}: no finding"
    first = findings[0]
    assert (first.kind, first.rank) == (kind, rank), [(f.kind, f.rank) for f in findings]
    assert first.lesson in LESSONS
    assert first.evidence and all(ev["file"].endswith(name) and ev["line"] >= 1 for ev in first.evidence)
    assert "{" not in first.summary and "?" not in first.summary.replace("?)", "")  # every field filled in


def test_every_catalogue_kind_is_spelled_as_documented_and_links_a_lesson() -> None:
    catalogue = load_catalogue()
    assert set(catalogue) == set(KINDS)
    assert all(spec.lesson in LESSONS and spec.fix and spec.summary for spec in catalogue.values())


def test_healthy_log_gives_no_finding() -> None:
    assert diagnose_files([LOGS / "healthy.log"]) == []


def test_oom_outranks_the_watchdog_timeout_it_caused() -> None:
    kinds = [f.kind for f in diagnose_files([LOGS / "cuda_oom_interleaved.log"])]
    assert kinds[0] == "cuda_oom" and "collective_timeout" in kinds and "child_failed" not in kinds


def test_oom_evidence_points_at_the_exact_line() -> None:
    oom = diagnose_files([LOGS / "cuda_oom_interleaved.log"])[0]
    lines = (LOGS / "cuda_oom_interleaved.log").read_text().splitlines()
    for ev in oom.evidence:
        assert ev["text"][:60] in lines[ev["line"] - 1]


def test_collective_timeout_names_the_rank_that_never_joined() -> None:
    finding = diagnose_files([LOGS / "collective_timeout_nccl.log"])[0]
    assert finding.rank == 2 and "rank 2 never joined" in finding.summary and "ALLREDUCE" in finding.summary


def test_nccl_error_carries_the_result_name() -> None:
    finding = diagnose_files([LOGS / "nccl_error_remote.log"])[0]
    assert finding.detail == "ncclRemoteError"


def test_duplicate_gpu_absorbs_the_generic_nccl_error() -> None:
    assert [f.kind for f in diagnose_files([LOGS / "duplicate_gpu.log"])] == ["duplicate_gpu"]


def test_errno_97_and_connection_refused_retries_alone_are_not_a_failure() -> None:
    text = ("[W socket.cpp:697] [c10d] The client socket has failed to connect to [localhost]:29500 "
            "(errno: 111 - Connection refused).\n"
            "[W socket.cpp:697] [c10d] The client socket cannot be initialized to connect to [::1]:29500 "
            "(errno: 97 - Address family not supported by protocol).\n")
    from mgtutor.diagnostics.failures.classify import diagnose_lines
    assert diagnose_lines(read_text(text)) == []


def test_several_files_are_read_as_one_run(tmp_path: Path) -> None:
    rank0 = tmp_path / "rank0.log"
    rank1 = tmp_path / "rank1.log"
    rank0.write_text("[rank0]: step 1\n")
    rank1.write_text((LOGS / "cuda_oom_old.log").read_text())
    findings = diagnose_files([rank0, rank1])
    assert findings[0].kind == "cuda_oom" and findings[0].evidence[0]["file"] == str(rank1)


def test_json_shape_of_a_finding() -> None:
    data = diagnose_files([LOGS / "port_in_use_libuv.log"])[0].to_dict()
    assert {"kind", "rank", "summary", "fix", "evidence", "lesson"} <= data.keys()
    assert "29500" in data["fix"]
    json.dumps(data)
