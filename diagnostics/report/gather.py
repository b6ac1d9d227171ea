"""Everything a run report shows, read once from the run record into plain dataclasses.

The HTML and the Markdown templates read the same `RunReport`; every string in it has already
passed the redactor (secrets always, host names and addresses on request), so a template cannot
leak what gathering removed.
"""
from __future__ import annotations

import shlex
import time
from dataclasses import dataclass, field
from typing import Any

from mgtutor.diagnostics.failures.classify import Finding
from mgtutor.diagnostics.failures.hang.flight_recorder import FlightRank, read_dumps
from mgtutor.diagnostics.failures.hang.watch import diagnose_with_hangs, latest_report
from mgtutor.diagnostics.report.logs import LogTail, first_nccl_warn, rank_tails
from mgtutor.diagnostics.report.redact import Redactor
from mgtutor.training.runs.events.reader import EventReader
from mgtutor.training.runs.events.types import Event, StartEvent
from mgtutor.training.runs.forensics.flight import fr_dir
from mgtutor.training.runs.records.record import RunRecord
from mgtutor.training.foundation.safe_io import read_text_regular
from mgtutor.training.runs.follow.samples import SampleRow, read_samples
from mgtutor.training.runs.forensics.stacks import list_captures, load_index

TRAINER = "mgtutor.training.worker.train"  # its flags are `mgtutor train`'s
FLIGHT_ENTRIES = 24  # the last collectives of each rank: where they part is what matters


@dataclass
class Fact:
    name: str
    value: str


@dataclass
class RankStack:
    rank: int
    where: str  # the hang analysis' one line: "waits in all_reduce at train.py:42"
    text: str  # the stack file as captured: Python frames, and native ones where py-spy read them
    native: bool
    flight: list[dict[str, str]] = field(default_factory=list)  # seq, op, sizes, state, where


@dataclass
class HangSection:
    kind: str | None
    summary: str
    fix: str
    captured: str
    ranks: list[RankStack]
    flight_lines: list[str]
    missing: list[str]


@dataclass
class RunReport:
    run_id: str
    title: str
    status: str
    facts: list[Fact]
    rank_exits: list[Fact]
    findings: list[dict[str, Any]]
    hang: HangSection | None
    logs: list[LogTail]
    env: list[Fact]
    doctor_text: str | None
    doctor: dict[str, Any] | None
    events: list[Event]
    samples: list[SampleRow]
    started: float | None
    world_size: int
    nnodes: int
    backend: str
    problem_kind: str
    nccl_warn: str | None
    nccl_debug: str | None
    command: str
    repro: list[str] = field(default_factory=list)  # the same launch, as mgtutor and as plain torchrun
    traceback: LogTail | None = None  # the log with the first error of the rank that failed first
    generated: float = field(default_factory=time.time)


def _when(t: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(t)) if t else "unknown"


def repro_lines(target: list[str], world: int, backend: str) -> list[str]:
    """The launch again: with mgtutor (what was typed), and with plain torchrun (what a maintainer has)."""
    if not target:
        return []
    quoted = " ".join(shlex.quote(arg) for arg in target)
    if target[:2] == ["-m", TRAINER]:
        mine = f"mgtutor train --nproc {world} --backend {backend or 'auto'} {shlex.join(target[2:])}"
    else:
        mine = f"mgtutor run --nproc {world} --backend {backend or 'auto'} -- {quoted}"
    return [mine, f"torchrun --nproc-per-node {world} {quoted}"]


def problem_kind(status: str, findings: list[dict[str, Any]], hang: HangSection | None) -> str:
    """NCCL's template asks which of hang / crash / slow / corruption it is."""
    kinds = {f["kind"] for f in findings}
    if hang is not None or kinds & {"collective_timeout", "rendezvous_timeout", "nccl_init_timeout",
                                    "world_size_mismatch", "rank_outside_collective"}:
        return "hang"
    if kinds & {"nan_loss", "no_distributed_sampler"}:
        return "corruption (wrong numbers, no error)"
    if kinds & {"straggler", "dataloader_slow"}:
        return "slow"
    return "crash" if status in ("failed", "lost") else ("none (the run finished)" if status == "finished" else status)


def _flight_rows(rank: FlightRank | None, clean: Redactor) -> list[dict[str, str]]:
    if rank is None:
        return []
    return [{"seq": str(e.seq), "op": e.op, "sizes": clean.text(str(e.sizes))[:60], "state": e.state,
             "where": clean.text(e.where or "")} for e in rank.entries[-FLIGHT_ENTRIES:]]


def hang_section(record: RunRecord, world_size: int, clean: Redactor) -> HangSection | None:
    """The newest saved capture: each rank's stack file whole, its Flight Recorder entries beside it."""
    captures = list_captures(record)
    if not captures:
        return None
    capture = captures[-1]
    report = latest_report(record)
    dumps = read_dumps(fr_dir(record))
    index = load_index(capture)
    native = {p.get("rank"): bool(p.get("native")) for p in index.get("processes") or [] if isinstance(p, dict)}
    ranks = sorted({int(p.name[4:-4]) for p in capture.glob("rank*.txt") if p.name[4:-4].isdigit()}
                   | set(report.where if report else ()))
    stacks = []
    for rank in ranks:
        path = capture / f"rank{rank}.txt"
        try:
            text = read_text_regular(path)
        except OSError as exc:
            text = f"(no stack file: {exc.strerror or exc})"
        where = report.where.get(rank) if report else None
        stacks.append(RankStack(rank=rank, where=clean.text(where.describe() if where else "not analysed"),
                                text=clean.text(text), native=native.get(rank, False) or "(native)" in text.lower(),
                                flight=_flight_rows(dumps.get(rank), clean)))
    return HangSection(kind=report.kind if report else None, summary=clean.text(report.summary if report else ""),
                       fix=clean.text(report.fix if report else ""),
                       captured=_when(index.get("started") if isinstance(index.get("started"), (int, float)) else None),
                       ranks=stacks, flight_lines=[clean.text(x) for x in (report.flight if report else [])],
                       missing=[clean.text(x) for x in (report.missing if report else [])])


def finding_dict(finding: Finding, clean: Redactor) -> dict[str, Any]:
    return {"kind": finding.kind, "rank": finding.rank, "summary": clean.text(finding.summary),
            "fix": clean.text(finding.fix), "lesson": finding.lesson, "detail": clean.text(finding.detail or ""),
            "evidence": [{"file": clean.text(str(ev.get("file", "?"))), "line": ev.get("line", "?"),
                          "text": clean.text(str(ev.get("text", "")).strip())} for ev in finding.evidence]}


def gather(record: RunRecord, clean: Redactor, doctor: dict[str, Any] | None = None,
           doctor_text: str | None = None) -> RunReport:
    """The report of one run; `doctor` is the doctor report (collected by the caller, or None)."""
    meta, result, status = record.meta(), record.result(), record.status().value
    events = EventReader(record.events_path).read_all()
    hosts = {e.host for e in events if isinstance(e, StartEvent) and e.host}
    clean.learn_hosts([meta.host, meta.local_addr, meta.rdzv_endpoint, *hosts, meta.env.get("MASTER_ADDR")])
    clean.learn_secrets(meta.env)
    clean.learn_record(meta)
    world = meta.world_size or len(result.ranks)
    hang = hang_section(record, world, clean)
    findings = [finding_dict(f, clean) for f in diagnose_with_hangs(record)]
    command = clean.text(" ".join(meta.target) or "unknown")
    devices = ", ".join(str(d.get("name", d)) for d in meta.devices) or meta.device_note or "CPU"
    facts = [Fact("command", command), Fact("torchrun", clean.text(" ".join(meta.torchrun_argv))),
             Fact("ranks", str(world)), Fact("nodes", f"{meta.nnodes} (this is node {meta.node_rank})"),
             Fact("backend", meta.backend or "?"), Fact("devices", clean.text(devices)),
             Fact("host", clean.text(meta.host or "?")), Fact("working folder", clean.text(meta.cwd or "?")),
             Fact("started", _when(meta.started)),
             Fact("duration", f"{result.duration_s:.1f} s" if isinstance(result.duration_s, (int, float)) else "?"),
             Fact("status", status)]
    if meta.problem:
        facts.insert(0, Fact("record", f"{meta.problem}: what follows comes from the other files"))
    if meta.rdzv_endpoint:
        facts.append(Fact("rendezvous", clean.text(meta.rdzv_endpoint)))
    first = result.first_failure
    exits = [Fact(f"rank {r.rank}", f"{'signal ' + str(r.signal) if r.signal else 'exit ' + str(r.exit_code)} "
                                    f"({r.outcome})" + (" — failed first" if first and first.rank == r.rank else ""))
             for r in result.ranks]
    logs = rank_tails(record, clean)
    erred = [log for log in logs if log.first_error and log.rank is not None]  # torchrun's own: its shutdown
    traceback = next(iter([log for log in erred if first is not None and log.rank == first.rank] or erred), None)
    env = [Fact(k, v) for k, v in sorted(clean.env(meta.env).items())]
    return RunReport(
        run_id=record.run_id, title=meta.label or record.run_id, status=status, facts=facts, rank_exits=exits,
        findings=findings, hang=hang, logs=logs, env=env, doctor=doctor,
        doctor_text=clean.text(doctor_text) if doctor_text else None, events=events,
        samples=read_samples(record), started=meta.started, world_size=world, nnodes=meta.nnodes,
        backend=meta.backend or "?", problem_kind=problem_kind(status, findings, hang),
        nccl_warn=first_nccl_warn(logs), nccl_debug=meta.env.get("NCCL_DEBUG"), command=command,
        traceback=traceback, repro=[clean.text(line) for line in repro_lines(meta.target, world, meta.backend)])
