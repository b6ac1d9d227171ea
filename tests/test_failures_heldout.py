"""Logs the first catalogue missed or explained badly: each names its cause and the fix that cause needs."""
from __future__ import annotations

from pathlib import Path

from mgtutor.diagnostics.failures.classify import diagnose_files, diagnose_lines
from mgtutor.diagnostics.failures.logs.logparse import read_text

LOGS = Path(__file__).parent / "data" / "logs"


def _first(name: str):
    findings = diagnose_files([LOGS / name])
    assert findings, f"{name}: no finding"
    return findings[0], findings


def test_failed_dataset_download_is_not_a_generic_child_failure() -> None:
    first, findings = _first("dataset_download_failed.log")
    assert first.kind == "dataset_download_failed"
    assert "child_failed" not in [f.kind for f in findings]
    assert "Name or service not known" in first.summary and "not a problem with MASTER_ADDR" in first.summary
    for words in ("download=False", "root=", "dist.barrier()", "LOCAL_RANK", "HTTPS_PROXY"):
        assert words in first.fix, words
    assert any("URLError" in ev["text"] for ev in first.evidence)


def test_hugging_face_hub_unreachable_is_a_download_failure() -> None:
    text = ("[rank0]: requests.exceptions.ConnectionError: HTTPSConnectionPool(host='huggingface.co', port=443): "
            "Max retries exceeded with url: /api/datasets/cifar10 (Caused by NameResolutionError(\"<urllib3.connection."
            "HTTPSConnection object at 0x7f>: Failed to resolve 'huggingface.co' ([Errno -2] Name or service not known)\"))\n")
    findings = diagnose_lines(read_text(text))
    assert [(f.kind, f.rank) for f in findings] == [("dataset_download_failed", 0)]
    assert "huggingface.co" in findings[0].summary


def test_flight_recorder_dump_signal_alone_is_a_collective_timeout() -> None:
    first, _ = _first("collective_timeout_dump_signal.log")
    assert first.kind == "collective_timeout" and first.rank == 2
    assert first.summary.startswith("Ranks 0, 1, 3 waited") and "rank 2 never joined" in first.summary


def test_timeout_without_rank_prefixes_says_what_is_known() -> None:
    first, _ = _first("collective_timeout_norank.log")
    assert "?" not in first.summary and "?" not in first.fix
    assert first.summary.startswith("A rank waited 1800 s") and "ALLREDUCE" in first.summary


def test_nccl_buffer_oom_gets_the_nccl_fix() -> None:
    first, findings = _first("nccl_buffer_oom.log")
    assert first.kind == "cuda_oom" and "NCCL" in first.summary
    assert "NCCL_BUFFSIZE" in first.fix and "headroom" in first.fix and "gradient accumulation" not in first.fix
    assert "nccl_error" not in [f.kind for f in findings]  # the OOM explains ncclUnhandledCudaError
    pytorch_oom, _ = _first("cuda_oom_interleaved.log")
    assert "gradient accumulation" in pytorch_oom.fix and "NCCL_BUFFSIZE" not in pytorch_oom.fix


def test_identical_batches_on_two_ranks_mean_no_sampler_but_shapes_do_not() -> None:
    first, _ = _first("same_batches_no_sampler.log")
    assert first.kind == "no_distributed_sampler" and "[45012, 3317" in first.summary
    assert {ev["line"] for ev in first.evidence} == {3, 4}
    sharded = ("[rank0]: epoch 0 first batch indices [45012, 3317, 28190, 771]\n"
               "[rank1]: epoch 0 first batch indices [1290, 40877, 2201, 36518]\n")
    shapes = ("[rank0]: first batch shape [64, 3, 32, 32] indices [1, 2]\n"
              "[rank1]: first batch shape [64, 3, 32, 32] indices [1, 2]\n")
    same_rank = "[rank0]: batch indices [1, 2, 3]\n[rank0]: batch indices [1, 2, 3]\n"
    for text in (sharded, shapes, same_rank):
        assert diagnose_lines(read_text(text)) == [], text


def test_kubernetes_shm_failure_names_the_memory_volume() -> None:
    first, _ = _first("shm_exhausted_k8s.log")
    assert first.kind == "shm_exhausted"
    assert "emptyDir: {medium: Memory" in first.fix and "--shm-size" in first.fix and "/dev/shm" in first.fix
    bare = diagnose_lines(read_text("[rank0]: epoch 0 step 10 loss 2.3\nBus error (core dumped)\n"))
    assert bare and bare[0].kind == "shm_exhausted"


def test_port_in_use_fix_names_mgtutor_flags() -> None:
    first, _ = _first("port_in_use_libuv.log")
    assert "mgtutor run --nnodes N --node-rank R --rdzv-endpoint HOST:PORT" in first.fix
    assert first.fix.index("mgtutor run") < first.fix.index("torchrun")


def test_nccl_init_timeout_without_rank_prefixes_has_no_hole() -> None:
    text = "torch.distributed.DistStoreError: wait timeout after 600000ms, keys: /default_pg/0//cuda//0\n"
    first = diagnose_lines(read_text(text))[0]
    assert first.kind == "nccl_init_timeout" and first.summary.startswith("A rank waited for rank 0's ncclUniqueId")
    two = "".join(f"[rank{r}]: wait timeout after 600000ms, keys: /default_pg/0//cuda//0\n" for r in (1, 2))
    assert diagnose_lines(read_text(two))[0].summary.startswith("Ranks 1, 2 waited for rank 0's")
