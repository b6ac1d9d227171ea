"""Checks judge what a run DID, from each rank's real output — never the text of the script.

Lesson scripts print one line per fact they want checked, `REPORT {json}` (plain print: the
scripts must run without mgtutor), e.g. `REPORT {"epoch": 0, "indices": [3, 9, 4]}`. A check
kind below reads those reports (and the run's result) and answers passed/failed with what it
measured, so a failure says why ("rank 0 and rank 1 both saw sample 3 …").
"""
from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mgtutor.lessons.loader import Check
from mgtutor.training.foundation.i18n import N_
from mgtutor.training.foundation.said import Said
from mgtutor.training.runs.records.record import FirstFailure, RunRecord, RunResult, RunStatus
from mgtutor.training.runs.records.types import BY_EXIT, BY_SIGNAL

REPORT_PREFIX = "REPORT "


@dataclass
class Outcome:
    """What one run did: its result and every rank's reports and output."""

    result: RunResult
    world_size: int
    reports: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    stdout: dict[int, str] = field(default_factory=dict)
    stderr: dict[int, str] = field(default_factory=dict)

    def values(self, rank: int, key: str, where: dict[str, Any] | None = None) -> list[Any]:
        """Every value of `key` rank printed, in order, from reports matching `where`."""
        found = []
        for report in self.reports.get(rank, []):
            if key in report and all(report.get(k) == v for k, v in (where or {}).items()):
                found.append(report[key])
        return found

    def last(self, rank: int, key: str, where: dict[str, Any] | None = None) -> Any:
        values = self.values(rank, key, where)
        return values[-1] if values else None

    def last_error(self, rank: int) -> str:
        lines = [ln for ln in self.stderr.get(rank, "").splitlines() if ln.strip()]
        return lines[-1].strip() if lines else ""


@dataclass
class CheckResult:
    says: str
    passed: bool | None            # None: skipped
    detail: str                    # what was measured, or why it failed / was skipped

    @property
    def mark(self) -> str:
        return "✓" if self.passed else ("–" if self.passed is None else "✗")


def parse_reports(text: str) -> list[dict[str, Any]]:
    reports = []
    for line in text.splitlines():
        if line.startswith(REPORT_PREFIX):
            try:
                data = json.loads(line[len(REPORT_PREFIX):])
            except ValueError:
                continue
            if isinstance(data, dict):
                reports.append(data)
    return reports


def outcome_of(record: RunRecord) -> Outcome:
    result = record.result()
    world = result.world_size or record.meta().world_size
    outcome = Outcome(result=result, world_size=world)
    for rank in range(world):
        for stream, store in (("stdout", outcome.stdout), ("stderr", outcome.stderr)):
            try:
                store[rank] = record.rank_log(rank, stream).read_text(errors="replace")
            except OSError:
                store[rank] = ""
        outcome.reports[rank] = parse_reports(outcome.stdout[rank])
    return outcome


def _preview(items: list[Any], n: int = 5) -> str:
    shown = ", ".join(str(i) for i in sorted(items)[:n])
    return shown + (", …" if len(items) > n else "")


def _head(value: Any, n: int = 5) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(str(v) for v in value[:n]) + (", …]" if len(value) > n else "]")
    return str(value)[:40]


def check_exit_ok(o: Outcome, p: dict[str, Any]) -> tuple[bool, str]:
    failed = [r for r in o.result.ranks if r.outcome != "ok"]
    if o.result.status == RunStatus.FINISHED and not failed:
        return True, Said(N_("all {ranks} rank(s) exited 0 in {seconds} s"), ranks=o.world_size,
                          seconds=o.result.duration_s)
    if o.result.status == RunStatus.STOPPED and not o.result.first_failure:
        return False, Said(N_("the run did not finish in time and was stopped: a rank was waiting for the others "
                              "(a hang)"))
    first = o.result.first_failure
    if first is None:
        first = FirstFailure(failed[0].rank, failed[0].exit_code, failed[0].signal) if failed else FirstFailure()
    error = o.last_error(first.rank) if isinstance(first.rank, int) else ""
    rank = "?" if first.rank is None else first.rank
    if error:
        return False, Said(N_("rank {rank} failed ({how}): {error}"), rank=rank, how=_how(first), error=error)
    return False, Said(N_("rank {rank} failed ({how})"), rank=rank, how=_how(first))


def _how(first: FirstFailure) -> Said:
    """How a rank ended (the run record's words), kept to be said in the reader's language."""
    return Said(BY_SIGNAL, signal=first.signal) if first.signal else Said(BY_EXIT, code=first.exit_code)


def check_every_rank_reports(o: Outcome, p: dict[str, Any]) -> tuple[bool, str]:
    missing = [r for r in range(o.world_size) if not o.values(r, p["key"], p.get("where"))]
    if missing:
        return False, Said(N_("rank(s) {ranks} never reported {key}"), ranks=missing, key=repr(p["key"]))
    shown = {r: o.last(r, p["key"], p.get("where")) for r in range(min(o.world_size, 4))}
    return True, Said(N_("{key} per rank: {values}"), key=p["key"], values=shown)


def check_disjoint(o: Outcome, p: dict[str, Any]) -> tuple[bool, str]:
    """No sample seen by two ranks; with `cover`, together they saw the whole data set once."""
    seen: dict[int, set[Any]] = {}
    for rank in range(o.world_size):
        values = o.values(rank, p["key"], p.get("where"))
        if not values:
            return False, Said(N_("rank {rank} never reported which samples it saw ({key})"), rank=rank,
                               key=repr(p["key"]))
        seen[rank] = {item for value in values for item in value}
    for a in seen:
        for b in seen:
            if a < b and seen[a] & seen[b]:
                common = seen[a] & seen[b]
                return False, Said(N_("rank {a} and rank {b} both saw {count} of the same samples ({samples}): "
                                      "every rank trains on the same data"), a=a, b=b, count=len(common),
                                   samples=_preview(list(common)))
    union = set().union(*seen.values())
    sizes = {r: len(s) for r, s in seen.items()}
    if p.get("cover"):
        total = o.last(0, p["cover"])
        if isinstance(total, int) and len(union) < total:
            return False, Said(N_("the ranks saw {seen} of {total} samples between them"), seen=len(union), total=total)
    return True, Said(N_("disjoint shards, samples per rank {sizes}, {distinct} distinct in all"),
                      sizes=sizes, distinct=len(union))


def check_changes_between(o: Outcome, p: dict[str, Any]) -> tuple[bool, str]:
    """The value of `key` differs between two reports with different `field` (e.g. the epoch)."""
    rank, fld = p.get("rank", 0), p["field"]
    first = o.last(rank, p["key"], {fld: p["a"]})
    second = o.last(rank, p["key"], {fld: p["b"]})
    if first is None or second is None:
        return False, Said(N_("rank {rank} did not report {key} for {field} {a} and {b}"),
                           rank=rank, key=repr(p["key"]), field=fld, a=p["a"], b=p["b"])
    if first == second:
        return False, Said(N_("rank {rank} got the same {key} in {field} {a} and {field} {b}: {head} both times"),
                           rank=rank, key=p["key"], field=fld, a=p["a"], b=p["b"], head=_head(first))
    return True, Said(N_("rank {rank}: {field} {a} starts {first}, {field} {b} starts {second}"),
                      rank=rank, field=fld, a=p["a"], b=p["b"], first=_head(first), second=_head(second))


def check_equal_across_ranks(o: Outcome, p: dict[str, Any]) -> tuple[bool, str]:
    values = {r: o.last(r, p["key"], p.get("where")) for r in range(o.world_size)}
    if any(v is None for v in values.values()):
        return False, Said(N_("not every rank reported {key}: {values}"), key=repr(p["key"]), values=values)
    ref = values[0]
    tol = float(p.get("tol", 0.0))
    for rank, value in values.items():
        same = math.isclose(value, ref, rel_tol=tol, abs_tol=tol) if isinstance(ref, (int, float)) else value == ref
        if not same:
            return False, Said(N_("{key} differs: rank 0 has {ref}, rank {rank} has {value}"),
                               key=p["key"], ref=ref, rank=rank, value=value)
    return True, Said(N_("{key} = {ref} on all {ranks} ranks"), key=p["key"], ref=ref, ranks=o.world_size)


def check_only_rank(o: Outcome, p: dict[str, Any]) -> tuple[bool, str]:
    """Only `rank` did the thing (wrote the checkpoint, printed the log line), and it did it."""
    want = p.get("rank", 0)
    doers = {r: len(o.values(r, p["key"])) for r in range(o.world_size) if o.values(r, p["key"])}
    if want not in doers:
        return False, Said(N_("rank {rank} never reported {key}"), rank=want, key=repr(p["key"]))
    others = [r for r in doers if r != want]
    if others:
        return False, Said(N_("{key} was done by ranks {ranks}, not only rank {rank}: {times} times in all"),
                           key=p["key"], ranks=sorted(doers), rank=want, times=sum(doers.values()))
    return True, Said(N_("only rank {rank} did {key} ({times} time(s))"), rank=want, key=p["key"], times=doers[want])


def check_all_true(o: Outcome, p: dict[str, Any]) -> tuple[bool, str]:
    ranks = p.get("ranks") or list(range(o.world_size))
    values = {r: o.last(r, p["key"]) for r in ranks}
    bad = {r: v for r, v in values.items() if v is not True}
    if bad:
        why = {r: o.last(r, p["why"]) for r in bad} if p.get("why") else bad
        return False, Said(N_("{key} is not true on rank(s) {ranks}: {why}"), key=p["key"], ranks=sorted(bad), why=why)
    return True, Said(N_("{key} on ranks {ranks}"), key=p["key"], ranks=ranks)


def check_value_range(o: Outcome, p: dict[str, Any]) -> tuple[bool, str]:
    rank = p.get("rank", 0)
    value = o.last(rank, p["key"], p.get("where"))
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
        return False, Said(N_("rank {rank} reported no number for {key} (got {value})"),
                           rank=rank, key=repr(p["key"]), value=repr(value))
    low, high = p.get("min"), p.get("max")
    unit = p.get("unit", "")
    if low is not None and value < low:
        return False, Said(N_("{key} = {value}, below {limit}"), key=p["key"], value=f"{value:g}{unit}",
                           limit=f"{low:g}{unit}")
    if high is not None and value > high:
        return False, Said(N_("{key} = {value}, above {limit}"), key=p["key"], value=f"{value:g}{unit}",
                           limit=f"{high:g}{unit}")
    return True, f"{p['key']} = {value:g}{unit}"


def check_close_to(o: Outcome, p: dict[str, Any]) -> tuple[bool, str]:
    """Two numbers one rank reported agree within a relative tolerance: the loss of the run and the
    loss a one-process run reaches on the same samples."""
    rank = p.get("rank", 0)
    value, reference = o.last(rank, p["key"]), o.last(rank, p["other"])
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (value, reference)):
        return False, Said(N_("rank {rank} did not report both {key} and {other}"),
                           rank=rank, key=repr(p["key"]), other=repr(p["other"]))
    tol = float(p.get("rel_tol", 1e-6))
    if not math.isclose(value, reference, rel_tol=tol, abs_tol=tol):
        return False, Said(N_("{key} = {value:.8g}, but {other} = {reference:.8g}: more than {tol:g} apart"),
                           key=p["key"], value=value, other=p["other"], reference=reference, tol=tol)
    return True, Said(N_("{key} = {value:.8g}, {other} = {reference:.8g}"),
                      key=p["key"], value=value, other=p["other"], reference=reference)


def check_run_fails(o: Outcome, p: dict[str, Any]) -> tuple[bool, str]:
    """A failure demo must fail, and fail where the lesson says (the first failing rank)."""
    first = o.result.first_failure
    if not first:
        return False, Said(N_("the run was meant to fail on rank {rank} but ended {status}"),
                           rank=p.get("rank"), status=o.result.status)
    if "rank" in p and first.rank != p["rank"]:
        return False, Said(N_("rank {rank} failed first, not rank {wanted}"), rank=first.rank, wanted=p["rank"])
    error = o.last_error(first.rank) if first.rank is not None else ""
    return True, Said(N_("rank {rank} failed first (exit {code}): {error}"), rank=first.rank, code=first.exit_code,
                      error=error[:120])


CHECKS: dict[str, Callable[[Outcome, dict[str, Any]], tuple[bool, str]]] = {
    "exit_ok": check_exit_ok,
    "every_rank_reports": check_every_rank_reports,
    "disjoint": check_disjoint,
    "changes_between": check_changes_between,
    "equal_across_ranks": check_equal_across_ranks,
    "only_rank": check_only_rank,
    "all_true": check_all_true,
    "value_range": check_value_range,
    "close_to": check_close_to,
    "run_fails": check_run_fails,
}


def evaluate(checks: tuple[Check, ...], outcome: Outcome) -> list[CheckResult]:
    results = []
    for check in checks:
        func = CHECKS.get(check.kind)
        if func is None:
            results.append(CheckResult(check.says, False, Said(N_("unknown check kind {kind}"), kind=repr(check.kind))))
            continue
        try:
            passed, detail = func(outcome, check.params)
        except (KeyError, TypeError, ValueError) as exc:  # a report of the wrong shape is a failed check
            passed, detail = False, Said(N_("could not read the run's reports: {error}"), error=repr(exc))
        results.append(CheckResult(check.says, passed, detail))
    return results
