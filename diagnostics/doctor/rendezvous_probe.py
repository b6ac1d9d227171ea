"""`mgtutor doctor --rendezvous`, the parent side: start N probe ranks, wait, and say who joined
when — or which ranks never joined and what to check. Headless and torch-free."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mgtutor.training.runs.events.types import ErrorEvent, Event, RendezvousEvent
from mgtutor.training.runs.launch.launcher import LaunchSpec, Run, launch
from mgtutor.training.runs.records.record import RunResult
from mgtutor.training.runs.follow.session import RunSession
from mgtutor.training.foundation.i18n import N_, _
from mgtutor.training.foundation.said import SaidReport

ADVICE = [
    N_("MASTER_ADDR and MASTER_PORT: the same on every node, and the address reachable from every node"),
    N_("world size: --nnodes × --nproc-per-node must equal the number of ranks you actually start"),
    N_("firewall: MASTER_PORT (and the ports NCCL/gloo pick) must be open between the nodes"),
    N_("network interface: NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME must name an interface that reaches the other "
       "nodes"),
    N_("the missing rank's own log: it may have crashed, or still be importing, before it joined"),
]


@dataclass
class ProbeOptions:
    nproc: int | None = 2
    timeout: float = 30.0
    backend: str = "auto"
    skip_ranks: list[int] = field(default_factory=list)

    def target(self) -> list[str]:
        argv = ["-m", "mgtutor.training.worker.probes.rendezvous_rank", "--timeout", f"{self.timeout:g}"]
        for rank in self.skip_ranks:
            argv += ["--skip-rank", str(rank)]
        return argv


def start(options: ProbeOptions) -> Run:
    return launch(LaunchSpec(target=options.target(), nproc=options.nproc, backend=options.backend,
                             label="rendezvous"))


def wait(run: Run, options: ProbeOptions, tick: Callable[[], None] | None = None) -> dict[str, Any]:
    """Wait for the probe (stopping it if it overruns its own timeout badly) and build the report."""
    limit = options.timeout * 2 + 120  # imports + init + the probe's own timeout
    events: list[Event] = []
    for update in RunSession(run.record, run, timeout_s=limit).updates():
        events += update.events
        if update.final:
            assert update.result is not None
            return report(run, options, update.result, events)
        if tick:
            tick()
    raise AssertionError("a session always ends with a final update")


def report(run: Run, options: ProbeOptions, result: RunResult, events: list[Event]) -> dict[str, Any]:
    meta = run.record.meta()
    started, world = meta.started or 0.0, meta.world_size
    ranks: dict[int, dict[str, Any]] = {r: {"rank": r, "status": "missing", "joined_s": None, "init_s": None,
                                            "barrier_s": None, "allreduce_s": None, "error": None}
                                        for r in range(world)}
    reported_missing: set[int] = set()
    last: dict[int, float] = {}  # when each rank finished its previous phase
    for event in events:
        entry = ranks.get(event.rank)
        if entry is None or not isinstance(event, (RendezvousEvent, ErrorEvent)):
            continue
        since = round(event.t - started, 3)
        phase = event.phase
        if isinstance(event, ErrorEvent):
            entry["error"] = f"{phase}: {event.message}"
        elif phase == "skipped":
            entry["status"] = "skipped"
        elif phase == "arrived":
            entry.update(status="waiting", joined_s=since)
            last[entry["rank"]] = since
        elif phase == "timeout":
            reported_missing.update(event.missing or [])
        elif phase in ("init", "barrier", "allreduce"):
            entry[f"{phase}_s"] = round(since - last.get(entry["rank"], since), 3)
            last[entry["rank"]] = since
            if phase == "allreduce":
                entry["status"] = "joined" if event.value == event.expected else "wrong sum"
    # A rank that wrote its arrival is not missing, even if an earlier waiter gave up before it came.
    arrived = {r for r, e in ranks.items() if e["joined_s"] is not None}
    missing = sorted((reported_missing | (set(ranks) - arrived)) - arrived)
    ok = not missing and all(e["status"] == "joined" for e in ranks.values())
    failed = [e for e in ranks.values() if e["error"]]
    def message(say: Callable[[str], str]) -> str:
        if ok:
            return say(N_("all {world} ranks joined (the last after {slowest:.2f} s), barrier and all-reduce "
                          "passed")).format(world=world, slowest=max(e["joined_s"] for e in ranks.values()))
        if missing:
            return say(N_("rank {names} never joined within {timeout:g} s; the others waited at the rendezvous")
                       if len(missing) == 1 else
                       N_("ranks {names} never joined within {timeout:g} s; the others waited at the rendezvous")
                       ).format(names=", ".join(str(r) for r in missing), timeout=options.timeout)
        if failed:
            return say(N_("rank {rank} failed at {error}")).format(rank=failed[0]["rank"], error=failed[0]["error"])
        return say(N_("the probe did not finish (status {status})")).format(status=result.status)

    report = ProbeReport({"ok": ok, "backend": meta.backend, "world_size": world, "timeout_s": options.timeout,
                          "ranks": list(ranks.values()), "missing": missing, "message": message(str),
                          "advice": [] if ok else ADVICE, "run_id": run.record.run_id,
                          "run_dir": str(run.record.path)})
    report.say = message
    return report


class ProbeReport(SaidReport):
    """The probe's report (printed by --json, saved): English; `said` is its message in the language in force."""

    kept_key = "message"


def format_report(rep: dict[str, Any]) -> str:
    """The report for a terminal, in the language in force (a report read back from disk keeps its message)."""
    lines = [_("rendezvous probe: {ranks} rank(s) on {backend}, timeout {timeout:g} s").format(
        ranks=rep["world_size"], backend=rep["backend"], timeout=rep["timeout_s"])]
    for e in rep["ranks"]:
        if e["joined_s"] is None:
            what = _("told not to join (--skip-rank)") if e["status"] == "skipped" else _("never joined")
            lines.append(f"  rank {e['rank']}  {what}")
            continue
        steps = "  ".join(f"{name} {e[key]:.3f} s" for name, key in
                          (("init", "init_s"), ("barrier", "barrier_s"), ("all-reduce", "allreduce_s"))
                          if e[key] is not None)
        waiting = e["status"] == "waiting"
        verb = (_("arrived after {seconds:.2f} s") if waiting else _("joined after {seconds:.2f} s")).format(
            seconds=e["joined_s"])
        tail = "  " + (_("then waited for the others") if waiting else steps)
        lines.append(f"  rank {e['rank']}  {verb}{tail}".rstrip())
    lines.append(("✓ " if rep["ok"] else "✗ ") + getattr(rep, "said", rep["message"]))
    if rep["advice"]:
        lines.append(_("check:"))
        lines += [f"  - {_(item)}" for item in rep["advice"]]
    lines.append(_("logs: {path}").format(path=rep["run_dir"]))
    return "\n".join(lines)
