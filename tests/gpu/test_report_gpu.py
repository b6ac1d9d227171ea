"""`mgtutor report` of a real one-GPU training run: the NVML meters the run recorded (samples.jsonl)
become the per-GPU charts (utilisation, memory, power, temperature) beside the per-rank ones. On the
GPU machine: `pytest -m gpu tests/gpu/test_report_gpu.py -s` (it prints what it measured)."""
from __future__ import annotations

import re
from pathlib import Path

from mgtutor.training.runs.records.record import RunRecord
from mgtutor.training.runs.follow.samples import read_samples
from tests.gpu.test_one_gpu import cli, one_gpu  # noqa: F401 - one_gpu is a fixture

GPU_CHARTS = ("gpu_util", "gpu_mem", "gpu_power", "gpu_temp")
RANK_CHARTS = ("throughput", "loss", "step_time", "gpu_memory")


def test_a_one_gpu_run_reports_its_nvml_charts(one_gpu, tmp_path):
    done = cli("train", "--model", "resnet18", "--nproc", "1", "--batch-size", "256", "--steps", "400",
               "--log-every", "10", timeout=540)
    assert done.returncode == 0, done.stderr
    match = re.search(r"run record: (\S+)", done.stdout)
    assert match, done.stdout
    record = RunRecord(Path(match.group(1)))
    rows = read_samples(record)
    meters = [g for row in rows for g in row.gpus]
    assert len(rows) >= 3 and meters, f"{len(rows)} sample rows"
    assert all(row.gpu_error is None for row in rows)
    power = [g.power_w for g in meters if g.power_w is not None]
    temps = [g.temp_c for g in meters if g.temp_c is not None]
    assert power and temps, "NVML gave no power or temperature"
    out = tmp_path / "gpu-report.html"
    report = cli("report", str(record.path), "-o", str(out), timeout=300)
    assert report.returncode == 0, report.stderr
    html = out.read_text()
    assert len(html.encode()) < 5 * 1024 * 1024
    for chart in GPU_CHARTS + RANK_CHARTS:
        figure = re.search(rf'<figure class="chart" id="chart-{chart}">(.*?)</figure>', html, re.S)
        assert figure, f"no {chart} chart"
        series = "series-GPU-" if chart in GPU_CHARTS else "series-rank-0"
        assert f'id="{series}' in figure.group(1), f"{chart}: no data line"
    assert "no GPU meters" not in html
    print(f"report: {len(rows)} sample rows over {rows[-1].t - rows[0].t:.0f} s; power {min(power):.0f}-"
          f"{max(power):.0f} W, temperature {min(temps):.0f}-{max(temps):.0f} C; {len(html.encode()) / 1024:.0f} KiB")
