"""A CUDA-missing failure told from the user's own line: the diagnosis names the script's frame and
never advises a flag the run already had (a run on gloo is not told to use gloo)."""
from __future__ import annotations

from pathlib import Path

from mgtutor.diagnostics.failures.classify import diagnose_run
from mgtutor.diagnostics.failures.from_script.cuda_missing import user_frame
from mgtutor.training.runs.records.types import RunMeta
from mgtutor.training.runs.records.record import RunRecord
from mgtutor.tui.cli import main as cli_main

TRACEBACK = """[rank0]: Traceback (most recent call last):
[rank0]:   File "{script}", line 26, in <module>
[rank0]:     main()
[rank0]:   File "{script}", line 12, in setup
[rank0]:     torch.cuda.set_device(local_rank)
[rank0]:   File "/usr/lib/python3/site-packages/torch/cuda/__init__.py", line 751, in set_device
[rank0]:     torch._C._cuda_setDevice(device)
[rank0]: {error}
"""


def record_with(tmp_path: Path, backend: str, error: str) -> tuple[RunRecord, Path]:
    script = tmp_path / "demo.py"
    script.write_text((Path(__file__).parent / "data" / "check" / "cuda-required.bad.py").read_text())
    record = RunRecord.create("demo-py", root=tmp_path / "runs")
    record.write_meta(RunMeta.from_json({"target": ["demo.py"], "cwd": str(tmp_path), "backend": backend,
                                         "world_size": 1}))
    (record.path / "logs" / "rank0.stderr.log").write_text(TRACEBACK.format(script=script, error=error))
    return record, script


def test_the_last_frame_in_the_users_file_is_found(tmp_path):
    record, script = record_with(tmp_path, "gloo", "RuntimeError: Found no NVIDIA driver on your system.")
    frame = user_frame(record.path / "logs" / "rank0.stderr.log", str(script))
    assert frame == {"file": str(script), "line": 12, "function": "setup", "code": "torch.cuda.set_device(local_rank)"}


def test_no_driver_on_a_gloo_run_names_the_line_and_not_the_backend_flag(tmp_path):
    record, script = record_with(tmp_path, "gloo", "RuntimeError: Found no NVIDIA driver on your system.")
    finding = next(f for f in diagnose_run(record) if f.kind == "no_cuda_driver")
    assert finding.summary.startswith("Your script asks for CUDA at demo.py:12 (`torch.cuda.set_device(local_rank)`).")
    assert "--backend gloo" not in finding.fix and finding.fix.startswith("The run already used gloo. The script asks")
    assert f"mgtutor check --fix {script}" in finding.fix
    assert finding.to_dict()["script_frame"]["line"] == 12


def test_invalid_device_ordinal_points_at_local_rank(tmp_path):
    record, _ = record_with(tmp_path, "nccl", "RuntimeError: CUDA error: invalid device ordinal")
    finding = next(f for f in diagnose_run(record) if f.kind == "invalid_device_ordinal")
    assert "demo.py:12" in finding.summary and "LOCAL_RANK (not RANK)" in finding.fix and "line 12" in finding.fix


def test_a_failure_outside_the_cuda_family_is_left_alone(tmp_path):
    record, _ = record_with(tmp_path, "gloo", "ValueError: bad batch")
    assert all(f.script_frame is None for f in diagnose_run(record))


def test_diagnose_prints_the_patch_check_fix_would_write(tmp_path, capsys):
    record, script = record_with(tmp_path, "gloo", "RuntimeError: Found no NVIDIA driver on your system.")
    cli_main(["diagnose", str(record.path)])
    out = capsys.readouterr().out
    assert f"patch (mgtutor check --fix {script} writes it):" in out
    assert "-    torch.cuda.set_device(local_rank)" in out and "+        torch.cuda.set_device(local_rank)" in out


def test_without_the_users_frame_a_gloo_run_is_still_not_told_to_use_gloo(tmp_path):
    record, _ = record_with(tmp_path, "gloo", "RuntimeError: Found no NVIDIA driver on your system.")
    (record.path / "logs" / "rank0.stderr.log").write_text("RuntimeError: Found no NVIDIA driver on your system.\n")
    finding = next(f for f in diagnose_run(record) if f.kind == "no_cuda_driver")
    assert finding.script_frame is None and "--backend gloo" not in finding.fix
    assert finding.fix.startswith("The run already used gloo, yet something asked for a GPU")
