"""Recorded meters: SampleRecorder writes samples.jsonl once a second through the sampler it is given,
read_samples reads it back typed. NVML is faked at its boundary; psutil and the files are real."""
from __future__ import annotations

import json
import os
import stat

from fake_nvml import install, two_h200

from mgtutor.diagnostics.meters import Sampler
from mgtutor.training.runs.records.record import RunRecord
from mgtutor.training.runs.follow.runstate import RankState, RunState
from mgtutor.training.runs.follow.samples import SampleRecorder, read_samples, samples_path


def state_with_ranks(pids: dict[int, int]) -> RunState:
    state = RunState(run_id="r")
    for rank, pid in pids.items():
        state.ranks[rank] = RankState(rank=rank, pid=pid)
    return state


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_rows_carry_every_gpu_and_each_rank(monkeypatch, tmp_path):
    install(monkeypatch, two_h200())
    record = RunRecord.create("samples", root=tmp_path)
    clock = Clock()
    recorder = SampleRecorder(record, Sampler(min_interval=0).row, clock=clock)
    state = state_with_ranks({0: os.getpid()})
    assert recorder.poll(state, 0.0) == []
    recorder.poll(state, 0.0)  # within the second: no second row
    clock.now += 1.0
    recorder.poll(state, 0.0)
    rows = read_samples(record)
    assert len(rows) == 2 and recorder.rows == 2
    first = rows[0]
    assert [g.index for g in first.gpus] == [0, 1]
    assert first.gpus[0].power_w == 123.5 and first.gpus[0].temp_c == 41
    assert first.gpus[0].util_pct == 37 and first.gpus[0].mem_used_mib == 1024
    assert [m.rank for m in first.ranks] == [0] and first.ranks[0].pid == os.getpid()
    assert first.ranks[0].rss_mib and first.ranks[0].rss_mib > 1
    assert first.host_cpu_pct is not None and first.ram_used_mib
    assert stat.S_IMODE(samples_path(record).stat().st_mode) == 0o600


def test_cpu_ranks_without_nvml_are_recorded(monkeypatch, tmp_path):
    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")
    record = RunRecord.create("samples", root=tmp_path)
    SampleRecorder(record, Sampler().row).poll(state_with_ranks({1: os.getpid()}), 0.0)
    (row,) = read_samples(record)
    assert row.gpus == [] and "MGTUTOR_NO_NVML" in (row.gpu_error or "")
    assert row.ranks[0].rank == 1 and row.ranks[0].cpu_pct is not None


def test_a_torn_line_is_skipped_and_a_broken_sampler_stops_only_the_recording(tmp_path):
    record = RunRecord.create("samples", root=tmp_path)
    samples_path(record).write_text(json.dumps({"t": 2.0, "ranks": {"0": {"pid": 5, "rss_mib": 3}}}) + "\n"
                                    + json.dumps({"t": 1.0}) + "\n{\"t\": 3.0, \"gpus\": [{\"ind")
    rows = read_samples(record)
    assert [r.t for r in rows] == [1.0, 2.0] and rows[1].ranks[0].rss_mib == 3.0

    def broken(_pids):
        raise RuntimeError("no meters today")

    recorder = SampleRecorder(record, broken, every_s=0)
    assert recorder.poll(state_with_ranks({0: 1}), 0.0) == []
    assert recorder.error == "RuntimeError: no meters today"
    assert len(read_samples(record)) == 2


def test_a_run_that_recorded_nothing_reads_as_no_rows(tmp_path):
    assert read_samples(RunRecord.create("none", root=tmp_path)) == []
