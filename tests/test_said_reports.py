"""A bench's verdict and a probe's message are said again in the language in force when a screen shows
them once more (the Diagnostics screen after a switch of language), and a report read back from disk keeps
its English."""
from __future__ import annotations

import json

from mgtutor.diagnostics.bench.allreduce_bench import BenchReport
from mgtutor.diagnostics.doctor.rendezvous_probe import ProbeReport
from mgtutor.training.foundation.i18n import N_, in_language

JOINED = N_("all {world} ranks joined (the last after {slowest:.2f} s), barrier and all-reduce passed")


def probe_report() -> ProbeReport:
    report = ProbeReport({"ok": True, "message": JOINED.format(world=2, slowest=0.5)})
    report.say = lambda say: say(JOINED).format(world=2, slowest=0.5)
    return report


def test_a_probes_message_is_said_in_the_language_in_force_when_read() -> None:
    report = probe_report()
    with in_language("zh"):
        assert "全部 2 个 rank 都加入了" in report.said
    with in_language("en"):
        assert report.said == "all 2 ranks joined (the last after 0.50 s), barrier and all-reduce passed"
    assert json.loads(json.dumps(report))["message"] == report["message"]  # --json and the saved file: English


def test_a_report_read_back_from_disk_keeps_its_english() -> None:
    kept = BenchReport(json.loads(json.dumps({"verdict": "gloo on CPU: no GPU link to measure"})))
    with in_language("zh"):
        assert kept.said == "gloo on CPU: no GPU link to measure"
    assert ProbeReport({"message": "rank 1 never joined"}).said == "rank 1 never joined"
