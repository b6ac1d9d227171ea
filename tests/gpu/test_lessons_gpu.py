"""Every lesson's steps on the real GPUs (2× H200 over NCCL), printing what they measured:
one GPU vs DataParallel vs DDP throughput, bf16/fp16 speed-up, compile speed-up, all-reduce busbw,
FSDP memory. Run on the GPU machine: `pytest -m gpu -s tests/gpu/test_lessons_gpu.py`.

Every check must pass except the timing ones (marked "timing" in lesson.json): their numbers are
printed for docs/benchmarks.md, never asserted.
"""
from __future__ import annotations

import json

import pytest

from mgtutor.lessons.loader import all_lessons
from mgtutor.lessons.runner import run_step

GPU_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


@pytest.mark.parametrize("lesson", all_lessons(), ids=lambda lesson: lesson.id)
def test_lesson_on_gpus(lesson, two_gpus, monkeypatch):
    for key, value in GPU_ENV.items():
        monkeypatch.setenv(key, value)
    for step in lesson.steps:
        result = run_step(lesson, step)
        print(f"\nLESSON {lesson.id} / {step.name}: {result.status} {result.reason}")
        print("MEASURED " + json.dumps({"lesson": lesson.id, "step": step.name, **result.measures}))
        for check in result.checks:
            print(f"  {check.mark} {check.says}: {check.detail}")
        if step.requires and result.status == "skipped":
            assert "pip install" in result.reason  # e.g. Accelerate absent there
            continue
        assert result.status != "skipped", result.reason
        timing = {c.says for c in step.checks if c.params.get("timing")}
        failed = [(c.says, c.detail) for c in result.checks if not c.passed and c.says not in timing]
        assert not failed, f"{result.run_path}: {failed}"
