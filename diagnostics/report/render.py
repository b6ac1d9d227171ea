"""A run record as one HTML file, or as the body of a GitHub issue (Markdown).

    report = build(record, redact_hosts=False, doctor="fresh")
    write(path, to_html(report))        # one file: styles and SVG charts inline, nothing fetched
    write(path, to_markdown(report))    # PyTorch's and NCCL's bug-template fields, ≤ 65,536 characters

The templates are Jinja2 files shipped as package data (diagnostics/report/templates/); HTML is
autoescaped, so a log line cannot become markup.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

from mgtutor.diagnostics.report.charts import Chart, draw, gpu_charts, process_charts, step_charts
from mgtutor.diagnostics.report.gather import Fact, RunReport, gather
from mgtutor.diagnostics.report.markdown_text import html_text, md_code, md_text
from mgtutor.diagnostics.report.redact import Redactor
from mgtutor.training.foundation.i18n import in_language
from mgtutor.training.runs.records.record import RunRecord
from mgtutor.training.foundation.safe_io import STDOUT_NAMES, write_output
from mgtutor.training.foundation.terminal import neutralise

GITHUB_BODY_LIMIT = 65536  # characters GitHub accepts in an issue body
MARKDOWN_TAILS = (40, 20, 10, 4, 0)  # log lines per file, fewer until the body fits
DOCTOR_MODES = ("fresh", "saved", "none")


def doctor_report(mode: str) -> tuple[dict[str, Any] | None, str | None]:
    """The doctor report (collect_env's facts, NCCL, topology): taken now, the last saved one, or none."""
    if mode == "none":
        return None, None
    from mgtutor.diagnostics.doctor import saved
    from mgtutor.diagnostics.doctor.report import collect, render_text

    data: dict[str, Any] | None = None
    if mode == "fresh":
        try:
            data = collect()
        except Exception:  # noqa: BLE001 - a broken probe must not cost the user the report
            data = None
    data = data or saved.load("doctor")
    if data is None:
        return None, None
    try:
        return data, render_text(data)
    except (KeyError, TypeError, ValueError):
        return data, None


def build(record: RunRecord, redact_hosts: bool = False, doctor: str = "fresh",
          environ: dict[str, str] | None = None) -> RunReport:
    clean = Redactor(hosts=redact_hosts, environ=environ)
    data, text = doctor_report(doctor)
    if data:
        clean.learn_versions([*(data.get("versions") or {}).values(), *(data.get("packages") or {}).values()])
        clean.learn_secrets(data.get("environment") or {})
    return gather(record, clean, doctor=data, doctor_text=text)


def charts(report: RunReport) -> dict[str, list[Chart]]:
    started = report.started or min([e.t for e in report.events] + [s.t for s in report.samples] or [0.0])
    groups = {"rank": step_charts(report.events, started, gpu=report.backend == "nccl"), "gpu": gpu_charts(report.samples, started),
              "process": process_charts(report.samples, started)}
    return {name: [draw(c) for c in group] for name, group in groups.items()}


def versions(report: RunReport) -> list[Fact]:
    v = (report.doctor or {}).get("versions") or {}
    return [Fact(name, str(v.get(key) or "-")) for name, key in
            (("torch", "torch"), ("CUDA (torch)", "cuda"), ("cuDNN", "cudnn"), ("NCCL", "nccl"),
             ("NVIDIA driver", "driver"), ("Python", "python"))]


def topology(report: RunReport) -> str | None:
    matrix = ((report.doctor or {}).get("topology") or {}).get("matrix")
    return str(matrix) if matrix else None


def _environment() -> Environment:
    env = Environment(loader=PackageLoader("mgtutor.diagnostics.report", "templates"),
                      autoescape=select_autoescape(["html", "html.j2"]), undefined=StrictUndefined,
                      trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    env.filters.update(fence=fence, md=md_text, code=md_code, html=html_text)
    return env


def fence(text: str) -> str:
    """A Markdown code fence longer than any run of backticks in `text`, so the log cannot close it."""
    longest = run = 0
    for ch in text:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    return "`" * max(3, longest + 1)


def _sample_note(report: RunReport) -> str:
    if not report.samples:
        return "no meters were recorded for this run (it was started before mgtutor recorded them, or by another tool)"
    error = next((s.gpu_error for s in report.samples if s.gpu_error), None)
    return f"no GPU meters: {error} — the ranks ran on the CPU" if error else ""


def to_html(report: RunReport) -> str:
    """The report file; a log's escape sequences and control characters never reach it (neutralise)."""
    return neutralise(_environment().get_template("report.html.j2").render(
        r=report, charts=charts(report), versions=versions(report), topology=topology(report),
        sample_note=_sample_note(report)))


def to_markdown(report: RunReport, limit: int = GITHUB_BODY_LIMIT) -> str:
    """The issue body; the logs shrink until it fits GitHub's limit (the facts never do)."""
    template = _environment().get_template("issue.md.j2")
    body = ""
    for lines in MARKDOWN_TAILS:
        body = neutralise(template.render(r=report, tail=lines, versions=versions(report), topology=topology(report),
                                          limit=limit))
        if len(body) <= limit:
            return body
    note = "\n\n(cut to GitHub's 65,536-character limit: the whole report is `mgtutor report --markdown`'s file)\n"
    return body[:limit - len(note)] + note


def write(path: Path, text: str) -> Path | None:
    """Write the report readable by its owner only (0600): it holds logs and paths of this machine.
    `-` is standard output (None); a device or FIFO is written in place, never replaced (safe_io)."""
    if str(path) in STDOUT_NAMES:
        return write_output(str(path), text)
    path = path.expanduser()
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_output(path, text)


def write_report(record: RunRecord, output: str | os.PathLike[str] | None = None, markdown: bool = False,
                 redact_hosts: bool = False, doctor: str = "fresh") -> Path | None:
    """Make and write the report (CLI and TUI alike): report.html or issue.md in the run folder by default.
    In English whatever the app speaks: it is a record, and it is written for a maintainer.
    None: it went to standard output (`-o -`)."""
    with in_language("en"):
        report = build(record, redact_hosts=redact_hosts, doctor=doctor)
        text = to_markdown(report) if markdown else to_html(report)
    return write(Path(output) if output else record.path / ("issue.md" if markdown else "report.html"), text)
