"""The failure classifier: turn what a run leaves behind into findings, most likely root cause first.

    findings = diagnose_run(RunRecord(path))        # rank logs, torchrun output, exits, events
    findings = diagnose_files(["job.log"])          # any log a user points at

Each Finding names a `kind` from the catalogue (failure_catalogue.json), the rank it concerns, the
few log lines that prove it (file and line number), a one-sentence summary, the fix and a lesson.
Reading never raises on bad bytes and keeps only a few lines per kind, so any log size fits in memory.
"""
from __future__ import annotations

import os
import string
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from mgtutor.training.foundation.i18n import _, sentences
from mgtutor.training.runs.events import checks as eventcheck
from mgtutor.training.runs.forensics.compile_crash import compiling_ranks
from mgtutor.training.runs.events.types import Event
from mgtutor.training.foundation.secrets import SecretRedactor, secret_values
from mgtutor.diagnostics.failures.catalogue import KindSpec, load_catalogue
from mgtutor.diagnostics.failures.logs.blockscan import scan_file
from mgtutor.diagnostics.failures.from_script.cuda_missing import explain as explain_cuda_missing
from mgtutor.diagnostics.failures.from_script.init_skipped import explain as explain_init_skipped
from mgtutor.diagnostics.failures.from_script.store_unreachable import explain as explain_store_unreachable
from mgtutor.diagnostics.failures.fatal_error import CrashSite, crash_site, fix_text, summary_text
from mgtutor.diagnostics.failures.logs.logparse import LogLine
from mgtutor.diagnostics.failures.oom.explain import explain_hits
from mgtutor.diagnostics.failures.logs.scan import Hit, Scanner

MAX_EVIDENCE = 4
ROOT_BONUS = 25  # a cause on the rank that failed first outranks the same weight elsewhere


@dataclass
class Finding:
    kind: str
    rank: int | None
    summary: str
    fix: str
    evidence: list[dict[str, Any]]
    lesson: str
    detail: str | None = None
    ranks: list[int] = field(default_factory=list)
    score: float = 0.0
    order: int = 0  # position of the first evidence: earlier wins among equal scores
    hit_ranks: frozenset[int] = frozenset()  # ranks whose own log lines proved it
    script_frame: dict[str, Any] | None = None  # the user's own line it failed at (cuda_missing.py)
    numbers: dict[str, Any] | None = None  # measured values behind the summary (cuda_oom: oom/explain.py)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "rank": self.rank, "summary": self.summary, "fix": self.fix,
                               "evidence": self.evidence, "lesson": self.lesson, "detail": self.detail,
                               "ranks": self.ranks}
        if self.numbers is not None:
            out["numbers"] = self.numbers
        if self.script_frame is not None:
            out["script_frame"] = self.script_frame
        return out


class _Fields(dict):
    """str.format_map that leaves unknown fields readable instead of raising."""

    def __missing__(self, key: str) -> str:
        return "?"


def render(template: str, fields: dict[str, Any]) -> str:
    try:
        return string.Formatter().vformat(template, (), _Fields(fields))
    except (ValueError, IndexError, AttributeError):
        return template


_UNKNOWN = "\x00"


def _unknown_rank(text: str) -> str:
    """A log with no rank prefixes still reads well: 'Rank ? ran out' becomes 'A rank ran out'."""
    return text.replace(f"Rank {_UNKNOWN}", _("A rank")).replace(f"rank {_UNKNOWN}", _("a rank")).replace(_UNKNOWN, "?")


def _rank_text(ranks: Iterable[int]) -> str:
    ranks = sorted(set(ranks))
    if not ranks:
        return "another rank"
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(map(str, ranks))


def make_finding(spec: KindSpec, hits: list[Hit], rank: int | None, extra: dict[str, Any] | None = None,
                 evidence: list[dict[str, Any]] | None = None) -> Finding:
    fields: dict[str, Any] = {}
    for hit in hits:
        for key, value in hit.groups.items():
            if value is not None:
                fields.setdefault(key, value)
    fields.update(extra or {})
    ranks = sorted({h.rank for h in hits if h.rank is not None} | ({rank} if rank is not None else set()))
    detail = _detail(spec, fields)
    fields.setdefault("rank", _UNKNOWN if rank is None else rank)
    fields.setdefault("ranks", _rank_text(ranks))
    fields["detail"] = detail or fields.get("message", "an NCCL error")
    first = min((h for h in hits if not h.evidence_only), key=lambda h: h.order, default=None)
    template = (first.summary if first else None) or spec.summary  # the first match's own words, if it has any
    fix = (first.fix if first else None) or spec.fix
    if evidence is None:
        evidence = _pick_evidence(hits)
    return Finding(kind=spec.kind, rank=rank, summary=_unknown_rank(render(_(template), fields)),
                   fix=_unknown_rank(render(_(fix), fields)),
                   evidence=evidence, lesson=spec.lesson, detail=detail, ranks=ranks,
                   order=min((h.order for h in hits), default=1 << 62),
                   hit_ranks=frozenset(h.line.rank for h in hits if h.line.rank is not None))


def _detail(spec: KindSpec, fields: dict[str, Any]) -> str | None:
    if fields.get("result"):
        return str(fields["result"])
    message = str(fields.get("message") or "").strip().lower()
    return spec.detail_map.get(message) if message else None


def _pick_evidence(hits: list[Hit]) -> list[dict[str, Any]]:
    """Matches first, one per rank where possible, then supporting lines."""
    chosen: list[Hit] = []
    seen_ranks: set[int | None] = set()
    for hit in sorted(hits, key=lambda h: (h.evidence_only, h.order)):
        if len(chosen) >= MAX_EVIDENCE:
            break
        if hit.rank in seen_ranks and not hit.evidence_only and any(not c.evidence_only for c in chosen):
            continue
        chosen.append(hit)
        seen_ranks.add(hit.rank)
    return [h.line.evidence() for h in sorted(chosen, key=lambda h: h.order)]


def _exit_how(code: Any, signal: Any) -> str:
    if signal:
        return _("signal {signal}").format(signal=signal)
    if code is None:  # a record whose exit is missing, or was left out as not what an exit can be
        return _("an exit the record does not say")
    return _("exit code {code}").format(code=code)


def build_findings(scanner: Scanner, run: dict[str, Any] | None = None,
                   events: Sequence[Event] | None = None, events_file: str = "events.jsonl") -> list[Finding]:
    """Findings from one scan plus (optionally) a run's exits and events, ranked."""
    catalogue = scanner.catalogue
    run = run or {}
    world_size = int(run.get("world_size") or 0) or (max(scanner.seen_ranks) + 1 if scanner.seen_ranks else 0)
    exits = scanner.exits_with(run.get("ranks") or [])
    root = scanner.root_rank(run.get("first_failure"))
    stopped = run.get("status") == "stopped"
    findings: list[Finding] = []
    for kind, hits in scanner.hits.items():
        if not any(not h.evidence_only for h in hits):
            continue  # supporting lines alone prove nothing
        spec = catalogue[kind]
        shaper = _SHAPERS.get(kind)
        finding = shaper(spec, hits, world_size, exits) if shaper else make_finding(spec, hits, _first_rank(hits))
        findings.append(finding)
    if events:
        for name, rank, fields, lines in eventcheck.check_all(events):
            evidence = [{"file": events_file, "line": n, "text": text} for n, text in lines]
            finding = make_finding(catalogue[name], [], rank, eventcheck.said_fields(fields), evidence)
            same = next((f for f in findings if f.kind == name), None)
            if same is not None:  # the log said it too: keep one finding, the event's numbers first
                findings.remove(same)
                finding.evidence = (evidence + same.evidence)[:MAX_EVIDENCE]
                finding.order, finding.hit_ranks = same.order, same.hit_ranks
            findings.append(finding)
    findings += _exit_findings(scanner, catalogue, exits, root, stopped, findings,
                               set(compiling_ranks(events or ())))
    present = {f.kind for f in findings}
    findings = [f for f in findings if not set(catalogue[f.kind].absorbed_by) & present]
    for finding in findings:
        spec = catalogue[finding.kind]
        finding.score = spec.weight + (ROOT_BONUS if spec.cause and root is not None and finding.rank == root else 0)
    findings.sort(key=lambda f: (-f.score, f.order))
    return findings


def _first_rank(hits: list[Hit]) -> int | None:
    for hit in sorted(hits, key=lambda h: (h.evidence_only, h.order)):
        if hit.rank is not None:
            return hit.rank
    return None


def _culprits(world_size: int, waiting: set[int]) -> list[int]:
    return [r for r in range(world_size) if r not in waiting] if world_size and waiting else []


def _missing_ranks(hits: list[Hit]) -> list[int]:
    """The ranks a timeout message names as missing (`missing_rank` in its pattern)."""
    return [int(rank) for h in hits if (rank := h.groups.get("missing_rank"))]


def _collective_timeout(spec: KindSpec, hits: list[Hit], world_size: int, exits: dict) -> Finding:
    waiting = {h.rank for h in hits if h.rank is not None and not h.evidence_only}
    named = _missing_ranks(hits)
    culprits = named or _culprits(world_size, waiting)
    fields = _merged(hits)
    timeout = f"{int(fields['timeout_ms']) / 1000:g} s" if str(fields.get("timeout_ms", "")).isdigit() else _("past the timeout")
    extra = {"waiters": _waiters_text(waiting), "timeout_text": timeout,
             "op_text": f" ({fields['op']}{', SeqNum ' + fields['seq'] if fields.get('seq') else ''})" if fields.get("op") else "",
             "culprit_text": _rank_text(culprits),
             "culprit_hint": _("here {ranks}, which printed no timeout.").format(ranks=_rank_text(culprits)) if culprits
             else _("the rank with no timeout line, or the lowest 'last completed NCCL work'.")}
    return make_finding(spec, hits, culprits[0] if len(culprits) == 1 else _first_rank(hits), extra)


def _waiters_text(waiting: set[int]) -> str:
    """'Rank 1', 'Ranks 0, 1, 3', or 'A rank' when the log has no rank prefixes."""
    if not waiting:
        return _("A rank")
    listed = ", ".join(map(str, sorted(waiting)))
    return (_("Rank {ranks}") if len(waiting) == 1 else _("Ranks {ranks}")).format(ranks=listed)


def _rendezvous_timeout(spec: KindSpec, hits: list[Hit], world_size: int, exits: dict) -> Finding:
    fields = _merged(hits)
    missing = _missing_ranks(hits)
    extra: dict[str, Any] = {"missing": _("the missing ranks") if not missing else _rank_text(missing)}
    if fields.get("ms") and not fields.get("seconds"):
        extra["seconds"] = f"{int(fields['ms']) / 1000:g}"
    total = fields.get("total") or world_size or None
    joined = fields.get("joined") or (max(int(total) - len(set(missing)), 0) if total and missing else None)
    extra["joined_text"] = (_(" but only {joined}/{total} ranks joined").format(joined=joined, total=total)
                            if total and joined is not None else "")
    extra.setdefault("seconds", fields.get("seconds") or _("its timeout"))
    return make_finding(spec, hits, missing[0] if len(set(missing)) == 1 else None, extra)


def _nccl_init_timeout(spec: KindSpec, hits: list[Hit], world_size: int, exits: dict) -> Finding:
    fields = _merged(hits)
    root = int(fields["root"]) if str(fields.get("root", "")).isdigit() else 0
    return make_finding(spec, hits, root, {"root": root, "waiters": _waiters_text({h.rank for h in hits if h.rank is not None})})


def _simple_fields(builder):
    def shape(spec: KindSpec, hits: list[Hit], world_size: int, exits: dict) -> Finding:
        return make_finding(spec, hits, _first_rank(hits), builder(_merged(hits), hits))
    return shape


def _merged(hits: list[Hit]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for hit in hits:
        for key, value in hit.groups.items():
            if value is not None:
                out.setdefault(key, value)
    return out


_SHAPERS = {
    "collective_timeout": _collective_timeout,
    "rendezvous_timeout": _rendezvous_timeout,
    "nccl_init_timeout": _nccl_init_timeout,
    "cuda_oom": _simple_fields(lambda f, h: {"gpu_text": _(" on GPU {gpu}").format(gpu=f["gpu"]) if f.get("gpu") else "",
                                             "size": f.get("size") or _("memory")}),
    "rendezvous_unreachable": _simple_fields(lambda f, h: {
        "who": _rank_text({x.rank for x in h if x.rank is not None}).capitalize() if any(x.rank is not None for x in h)
        else _("A rank or the torchrun agent"), "host": f.get("host", "MASTER_ADDR"), "port": f.get("port", "MASTER_PORT")}),
    "port_in_use": _simple_fields(lambda f, h: {"port": f.get("port", "MASTER_PORT")}),
    "shm_exhausted": _simple_fields(lambda f, h: {"who_text": _(" on {ranks}").format(
        ranks=_rank_text({x.rank for x in h if x.rank is not None})) if any(x.rank is not None for x in h) else ""}),
    "dataloader_worker_killed": _simple_fields(lambda f, h: {"how": (f.get("how") or _("exited unexpectedly")).strip()}),
    "ddp_unused_parameters": _simple_fields(lambda f, h: {"params_text": _(" (parameters {names})").format(
        names=f["params"].strip()[:120]) if f.get("params") else ""}),
    "collective_mismatch": _simple_fields(lambda f, h: {"mismatch_text": _(" (rank {rank} differs)").format(rank=f["rank"])
                                                        if f.get("rank") else ""}),
    "cuda_driver_too_old": _simple_fields(lambda f, h: {"cuda_text": f"{int(f['version']) // 1000}.{int(f['version']) % 1000 // 10}"
                                                        if str(f.get("version", "")).isdigit() else "?"}),
    "nan_loss": _simple_fields(lambda f, h: {"value": f.get("value", "NaN"),
                                             "step_text": _(" at step {step}").format(step=f["step"]) if f.get("step")
                                             else ""}),
    "watchdog_stuck": _simple_fields(lambda f, h: {"seconds": f.get("seconds", _("several hundred"))}),
}


def _exit_findings(scanner: Scanner, catalogue: dict[str, KindSpec], exits: dict[int, dict[str, Any]],
                   root: int | None, stopped: bool, found: list[Finding], compiling: set[int]) -> list[Finding]:
    """host_oom_killed and child_failed come from how ranks ended, not from one message. `compiling`: the
    ranks the events show inside the trainer's compile when they ended (a crash with no Python frame of its
    own, which native code leaves, is still the compiler's)."""
    if stopped:
        return []
    out: list[Finding] = []
    failing = root if root is not None else next((r for r, e in sorted(exits.items()) if e.get("failed")), None)
    if failing is None and not exits:  # a log with a traceback or a fatal error and no exit information
        failing = next(iter(scanner.exceptions), next(iter(scanner.fatal.first), None))
    if failing is None and not scanner.exceptions and not scanner.fatal.first:
        return out
    info = exits.get(failing, {}) if failing is not None else {}
    exception = scanner.exceptions.get(failing)
    fatal = scanner.fatal.of(failing) if exception is None else None
    killed = info.get("signal") == "SIGKILL" or info.get("exit_code") == -9
    if killed and exception is None and not any(f.kind == "host_oom_killed" for f in found):
        out.append(make_finding(catalogue["host_oom_killed"], [], failing, {},
                                [e for e in info.get("evidence", [])][:MAX_EVIDENCE] or
                                [{"file": "ranks", "line": 0, "text": f"rank {failing}: killed by SIGKILL"}]))
        return out
    if any(catalogue[f.kind].cause or failing in f.hit_ranks for f in found + out):
        return out  # something more specific already explains the failure
    if failing is None and exception is None and fatal is None:
        return out
    if fatal is not None:
        site = crash_site(fatal)
        if failing in compiling:
            site = replace(site, in_compile=True, in_trainer=True)
        out.append(_crashed(catalogue["child_failed"], failing, info, site))
        return out
    how = (_exit_how(info.get("exit_code"), info.get("signal")) if info else
           _("it raised an exception") if exception else _("an exit the record does not say"))
    evidence = ([exception.evidence()] if exception else []) + list(info.get("evidence", []))
    out.append(make_finding(catalogue["child_failed"], [], failing,
                            {"how": how, "exception_text": _(" after {error}").format(error=exception.text.strip()[:200])
                             if exception else _(", with no Python error in its log")}, evidence[:MAX_EVIDENCE]))
    return out


def _crashed(spec: KindSpec, rank: int | None, info: dict[str, Any], site: CrashSite) -> Finding:
    """child_failed for a rank that died of a fatal signal with faulthandler's dump in its log: the
    error, the crashing thread's innermost line and the user's own, and what to do about native code."""
    signal = info.get("signal") or site.signal
    how = _exit_how(info.get("exit_code"), signal) if info or signal else _("a fatal error")
    evidence = (site.evidence + list(info.get("evidence", [])))[:MAX_EVIDENCE]
    finding = make_finding(spec, [], rank, {"how": how, "exception_text": summary_text(site)}, evidence)
    finding.fix = _unknown_rank(fix_text(site, _UNKNOWN if rank is None else rank))
    return finding


def explain_oom(findings: list[Finding], scanner: Scanner, record: Any = None) -> list[Finding]:
    """A cuda_oom finding gets the numbers of PyTorch's message: what held the GPU, what to free, which
    ranks share it, and (after `mgtutor run --memory`) what filled it."""
    finding = next((f for f in findings if f.kind == "cuda_oom"), None)
    explanation = explain_hits(scanner.hits.get("cuda_oom", []), finding.rank, record) if finding else None
    if finding is not None and explanation is not None:
        finding.summary = sentences(finding.summary, explanation.summary())
        finding.fix = explanation.fix()
        finding.numbers = explanation.to_json()
    return findings


def redact_findings(findings: list[Finding], clean: SecretRedactor) -> list[Finding]:
    """The findings with every secret taken out of what they show (summary, fix, evidence lines):
    a diagnosis is shown, pasted and reported; the logs it quotes stay as the script wrote them."""
    for finding in findings:
        finding.summary, finding.fix = clean.text(finding.summary), clean.text(finding.fix)
        finding.detail = clean.text(finding.detail) if finding.detail else finding.detail
        finding.evidence = [_clean_values(ev, clean) for ev in finding.evidence]
        if finding.script_frame is not None:
            finding.script_frame = _clean_values(finding.script_frame, clean)
    return findings


def _clean_values(data: dict[str, Any], clean: SecretRedactor) -> dict[str, Any]:
    return {k: clean.text(v) if isinstance(v, str) else v for k, v in data.items()}


def run_redactor(record: Any) -> SecretRedactor:
    """The redactor for a run: this process's secrets, the run's (its record's keyed hashes), its argv's."""
    clean = SecretRedactor(os.environ)
    try:
        meta = record.meta()
    except (AttributeError, OSError):
        return clean
    clean.learn_digests(getattr(meta, "secret_digests", None))
    clean.learn_values(secret_values({}, [str(arg) for arg in getattr(meta, "target", None) or []]))
    return clean


def diagnose_lines(lines: Iterable[LogLine], run: dict[str, Any] | None = None) -> list[Finding]:
    scanner = Scanner(load_catalogue())
    for line in lines:
        scanner.feed(line)
    return redact_findings(explain_oom(build_findings(scanner, run), scanner), SecretRedactor(os.environ))


def diagnose_files(paths: Iterable[str | os.PathLike[str]]) -> list[Finding]:
    """Findings from log files; raises OSError when one cannot be read."""
    scanner = Scanner(load_catalogue())
    for path in paths:
        if Path(path).is_dir():
            raise IsADirectoryError(f"{path} is a directory")
        scan_file(scanner, os.fspath(path))
    return redact_findings(explain_oom(build_findings(scanner), scanner), SecretRedactor(os.environ))


def diagnose_run(record: Any) -> list[Finding]:
    """Findings from a run record: rank logs (stdout too: NCCL writes there), torchrun.log, exits, events."""
    scanner = Scanner(load_catalogue())
    for rank, stream, path in record.rank_logs():
        _scan_if_readable(scanner, path, rank, f"logs/{path.name}")
    _scan_if_readable(scanner, record.torchrun_log, None, "torchrun.log")
    events = eventcheck.run_events(record.events_path)
    result = record.result().to_json() if hasattr(record, "result") else {}
    findings = explain_cuda_missing(explain_oom(build_findings(scanner, result, events), scanner, record), record)
    findings = explain_init_skipped(findings, record)  # the script's own lines: the `if` that skipped its init
    findings = explain_store_unreachable(findings, record, lambda fields, evidence: make_finding(
        scanner.catalogue["rendezvous_unreachable"], [], None, fields, evidence))  # … and the rendezvous address
    return redact_findings(findings, run_redactor(record))


def _scan_if_readable(scanner: Scanner, path: Path, rank: int | None, name: str) -> None:
    try:
        scan_file(scanner, path, name, rank)
    except OSError:
        return
