"""Why a run hangs: compare every rank's stack from one capture and name the odd ranks and their lines.

    report = analyse_capture(capture_dir, world_size=2)      # a HangReport
    print(report.text())                                     # kind, ranks, where each waits, the fix
    report.finding()                                         # the same, as a classifier Finding

Kinds (failure_catalogue.json): `world_size_mismatch` (every rank waits in init_process_group for
more peers than were launched), `rank_outside_collective` (some ranks wait in a collective while
others are elsewhere: their data loader, a sleep, their own code, or gone), `collective_mismatch`
(the ranks wait in different collectives). When the stacks alone cannot tell, the report still says
where each rank waits, with no kind.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mgtutor.training.foundation.i18n import N_, _, ngettext, sentences
from mgtutor.diagnostics.failures.catalogue import load_catalogue
from mgtutor.diagnostics.failures.classify import Finding, render
from mgtutor.diagnostics.failures.hang.flight_recorder import FlightEntry, FlightRank, first_divergence, flight_lines, pending
from mgtutor.diagnostics.failures.kind_titles import kind_title
from mgtutor.diagnostics.failures.hang.stack_dumps import ProcessDump, Where, locate, parse_rank_file
from mgtutor.training.foundation.safe_io import entries, read_text_regular
from mgtutor.training.foundation.said import in_english, kept_or_text, said_again
from mgtutor.training.runs.forensics.stacks import load_index

WAITING = ("collective", "backward", "gpu")
STUCK_IN_DIST = ("init", "collective", "backward")  # "gpu": NCCL returned at once; the wait shows later


DOING = {"init": N_("waits in {op}"), "collective": N_("waits in {op}"), "backward": N_("waits in {op}"),
         "data": N_("waits for its DataLoader"), "gpu": N_("waits for the GPU"), "sleep": N_("sleeps"),
         "user code": N_("runs its own code")}


@dataclass
class RankWhere:
    rank: int
    pid: int | None
    where: Where
    worker: Where | None = None  # the busy DataLoader worker, when the rank waits for its data
    worker_pid: int | None = None
    problem: str | None = None  # why there is no stack
    pending: FlightEntry | None = None  # the collective the Flight Recorder says it waits in

    def op(self, say: Callable[[str], str] = str) -> str | None:
        """What it waits in: the stack's call, or the Flight Recorder's collective and where it was called."""
        entry = self.pending
        if entry is None:
            return self.where.op
        op = f"{entry.op} #{entry.seq}"
        return say(N_("{op}, called at {where}")).format(op=op, where=entry.where) if entry.where else op

    def describe(self, say: Callable[[str], str] = str) -> str:
        """Where the rank is, in English (the record) unless `say` translates."""
        w = self.where
        if w.category == "no stack":
            return say(N_("no stack ({why})")).format(why=self.problem or say(N_("unknown")))
        doing = DOING.get(w.category)
        text = say(doing).format(op=self.op(say)) if doing else w.category
        if w.comm_setup:
            text += say(N_(" (NCCL sets up its communicator: every peer must join)"))
        text += say(N_(" at {place}")).format(place=w.place(say))
        if self.worker is not None:
            text += say(N_("; worker {pid} is in {place}")).format(pid=self.worker_pid, place=self.worker.place(say))
            if self.worker.category == "sleep":
                text += say(N_(" (sleeping)"))
        return text

    def to_dict(self) -> dict[str, Any]:
        frame = self.where.frame
        out: dict[str, Any] = {"category": self.where.category, "op": self.where.op, "pid": self.pid,
                               "file": frame.file if frame else None, "line": frame.line if frame else None,
                               "function": frame.short_name if frame else None, "source": self.where.source or None}
        if self.worker is not None and self.worker.frame is not None:
            out["worker"] = {"pid": self.worker_pid, "file": self.worker.frame.file, "line": self.worker.frame.line,
                             "function": self.worker.frame.short_name, "source": self.worker.source or None}
        if self.problem:
            out["problem"] = self.problem
        return out


@dataclass
class HangReport:
    kind: str | None
    summary: str
    fix: str
    lesson: str
    ranks: list[int]  # the ranks the report points at (the odd ones)
    where: dict[int, RankWhere] = field(default_factory=dict)
    capture: str | None = None
    stacks: dict[int, str] = field(default_factory=dict)  # rank → saved stack file
    missing: list[str] = field(default_factory=list)
    flight: list[str] = field(default_factory=list)  # Flight Recorder lines (NCCL), when read
    places: tuple[Any, ...] = ()  # where every rank was by its stack alone (hang/watch.py compares two looks)
    # summary, fix and flight_recorder in the language in force, for the reader (to_dict's keys); the
    # fields above stay English (to_dict is saved with the run's stacks and printed by --json)
    said: dict[str, Any] = field(default_factory=dict)

    def text(self, prefix: str = "") -> str:
        head = _("hang report ({kind})").format(kind=kind_title(self.kind) or _("no known cause"))
        lines = [prefix + head + _(": ") + (self.said.get("summary") or self.summary)]
        for rank, where in sorted(self.where.items()):
            mark = "*" if rank in self.ranks else " "
            lines.append(f"{prefix} {mark} rank {rank}: {where.describe(_)}")
            if where.where.source:
                lines.append(f"{prefix}      {where.where.source[:100]}")
        lines += [f"{prefix}  " + _("flight recorder: {line}").format(line=line)
                  for line in self.said.get("flight_recorder", self.flight)]
        if self.fix:
            lines.append(f"{prefix}  " + _("fix: {fix}").format(fix=self.said.get("fix") or self.fix))
        if self.capture:
            lines.append(f"{prefix}  " + _("stacks: {path}").format(path=self.capture))
        lines += [f"{prefix}  " + _("missing: {what}").format(what=said_again(m)) for m in self.missing]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "summary": self.summary, "fix": self.fix, "lesson": self.lesson,
                "ranks": self.ranks, "where": {str(r): w.to_dict() for r, w in sorted(self.where.items())},
                "capture": self.capture, "stacks": {str(r): p for r, p in sorted(self.stacks.items())},
                "missing": [in_english(m) for m in self.missing], "flight_recorder": self.flight}

    def finding(self) -> HangFinding | None:
        if self.kind is None:
            return None
        evidence = [{"file": w.where.frame.file if w.where.frame else self.stacks.get(r, self.capture or "?"),
                     "line": w.where.frame.line if w.where.frame else 0, "text": f"rank {r}: {w.describe(_)}"}
                    for r, w in sorted(self.where.items())][:4]
        return HangFinding(kind=self.kind, rank=self.ranks[0] if len(self.ranks) == 1 else None,
                           summary=self.said.get("summary") or self.summary, fix=self.said.get("fix") or self.fix,
                           evidence=evidence, lesson=self.lesson,
                           ranks=list(self.ranks), report=self)


@dataclass
class HangFinding(Finding):
    report: HangReport | None = None

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        if self.report is not None:
            out["where"] = {str(r): w.to_dict() for r, w in sorted(self.report.where.items())}
            out["stacks"] = {str(r): p for r, p in sorted(self.report.stacks.items())}
            out["capture"] = self.report.capture
            out["flight_recorder"] = self.report.flight
        return out


def rank_wheres(procs: list[ProcessDump]) -> RankWhere | None:
    main = next((p for p in procs if p.role == "main"), None)
    if main is None:
        return None
    if main.method == "none" or not main.threads:
        return RankWhere(main.rank, main.pid, Where("no stack", None, None), problem=main.problem)
    where = RankWhere(main.rank, main.pid, locate(main.main_thread()))
    if _waits_for_spawned(main):  # mp.spawn's children are the ranks that work: the rank is where they are
        where = _spawned_where(main.rank, procs) or where
    if where.where.category == "data":
        for worker in (p for p in procs if p.role == "worker"):
            thread = worker.main_thread()
            if thread and any("/torch/utils/data/_utils/fetch.py" in f.file for f in thread.frames):
                where.worker, where.worker_pid = locate(thread), worker.pid
                break
    return where


def _waits_for_spawned(main: ProcessDump) -> bool:
    thread = main.main_thread()
    return thread is not None and any("/torch/multiprocessing/spawn.py" in f.file for f in thread.frames)


def _spawned_where(rank: int, procs: list[ProcessDump]) -> RankWhere | None:
    """The place of the rank's busiest mp.spawn child: one waiting in torch.distributed first, else one in
    its own code (multiprocessing's resource tracker is no rank)."""
    threads = [(p.pid, p.main_thread()) for p in procs if p.role == "worker"]
    places = [(pid, locate(thread)) for pid, thread in threads if thread is not None
              and not any("multiprocessing/resource_tracker.py" in f.file for f in thread.frames)]
    for categories in (STUCK_IN_DIST, ("user code", "sleep", "data", "gpu")):
        found = next(((pid, w) for pid, w in places if w.category in categories and w.frame is not None), None)
        if found is not None:
            return RankWhere(rank, found[0], found[1])
    return None


def analyse_capture(capture: Path, world_size: int, flight: dict[int, FlightRank] | None = None) -> HangReport:
    """The report for one saved capture (stacks/<id>/): read every rank file, compare, explain.
    `flight`: the Flight Recorder dumps (NCCL), whose pending collectives say who waits where."""
    texts: dict[int, str] = {}
    for path in entries(capture, "rank*.txt"):
        suffix = path.stem.removeprefix("rank")
        if suffix.isdigit():
            try:
                texts[int(suffix)] = read_text_regular(path)
            except OSError:
                continue
    report = analyse_texts(texts, load_index(capture), world_size, flight)
    report.capture = str(capture)
    report.stacks = {rank: str(capture / f"rank{rank}.txt") for rank in report.where if rank in texts}
    return report


def _kept_missing(index: dict[str, Any]) -> list[str]:
    """What a capture could not get, as its index keeps it: message ids (said again in the reader's
    language) where the capture kept them, else its English sentences."""
    said, english = index.get("missing_said"), index.get("missing", [])
    if isinstance(said, list) and len(said) == len(english):
        return [kept_or_text(item) or str(text) for item, text in zip(said, english)]
    return [str(m) for m in english]


def analyse_texts(texts: dict[int, str], index: dict[str, Any], world_size: int,
                  flight: dict[int, FlightRank] | None = None) -> HangReport:
    """The same from a capture in memory: rank → its rank<R>.txt text, and the capture's index."""
    wheres: dict[int, RankWhere] = {}
    for text in texts.values():
        where = rank_wheres(parse_rank_file(text))
        if where is not None:
            wheres[where.rank] = where
    missing = _kept_missing(index)
    exited = {int(m.group(1)): m.group(2) for m in (re.match(r"rank (\d+): exited \(([^)]*)\)", in_english(x))
                                                    for x in missing) if m}
    if flight:
        _apply_flight(wheres, flight)
    report = explain(wheres, world_size, exited, index.get("rank_env") or {})
    report.missing = missing
    if flight:
        report.flight = flight_lines(flight)
        report.said["flight_recorder"] = flight_lines(flight, _)
        divergence = first_divergence(flight)
        if divergence is not None and report.kind in ("collective_mismatch", "rank_outside_collective"):
            report.summary += f" Flight Recorder: {divergence.text()}."
            if report.said.get("summary"):
                report.said["summary"] += _(" Flight Recorder: {divergence}.").format(divergence=divergence.text(_))
    return report


def _apply_flight(wheres: dict[int, RankWhere], flight: dict[int, FlightRank]) -> None:
    """On NCCL a collective returns at once and the rank waits later (synchronize, .item()): the
    Flight Recorder's entered-but-not-completed collective says what it really waits for."""
    for rank, entry in pending(flight).items():
        where = wheres.get(rank)
        if where is None or where.where.category in ("collective", "backward", "init", "no stack"):
            continue
        w = where.where
        where.pending = entry
        where.where = Where("collective", where.op(), w.frame, w.source, w.args, w.inner)


def _said(summary: str, fix: str, fields: dict[str, Any]) -> dict[str, str]:
    """A catalogue kind's summary and fix in the language in force (HangReport.said)."""
    return {"summary": render(_(summary), fields), "fix": render(_(fix), fields)}


def _ranks_text(ranks: list[int], say: Callable[[str], str] = str) -> str:
    """'rank 1', 'ranks 0, 2': in English unless `say` is the translation."""
    words = ngettext("rank {ranks}", "ranks {ranks}", len(ranks)) if say is _ else \
        ("rank {ranks}" if len(ranks) == 1 else "ranks {ranks}")
    return words.format(ranks=", ".join(map(str, sorted(ranks))))


def _both(make: Callable[[Callable[[str], str]], Any]) -> tuple[Any, Any]:
    """What `make(say)` builds in English (the record) and in the language in force (the reader's)."""
    return make(_as_is), make(_)


def explain(wheres: dict[int, RankWhere], world_size: int, exited: dict[int, str] | None = None,
            rank_env: dict[str, dict[str, str]] | None = None) -> HangReport:
    catalogue = load_catalogue()
    exited = exited or {}
    seen = {r: w for r, w in wheres.items() if w.where.category != "no stack"}
    by_category: dict[str, list[int]] = {}
    for rank, where in sorted(seen.items()):
        by_category.setdefault(where.where.category, []).append(rank)
    all_init = len(by_category.get("init", [])) == len(seen)
    all_in_setup = all(w.where.comm_setup for w in seen.values())  # NCCL: init_process_group returned at once
    if seen and (all_init or all_in_setup) and not exited:
        return _init_report(catalogue, seen, world_size, rank_env or {})
    waiting = [r for r, w in sorted(seen.items()) if w.where.category in WAITING]
    outside = sorted([r for r in seen if r not in waiting] + list(exited))
    if waiting and outside:
        spec = catalogue["rank_outside_collective"]
        def outside_fields(say: Callable[[str], str]) -> dict[str, str]:
            ops = sorted({seen[r].op(say) or "?" for r in waiting})
            hints = [_outside_hint(r, seen.get(r), exited.get(r), say) for r in outside]
            first = say(N_("; ")).join(h[0] for h in hints)  # the separators are the language's too
            waits = say(N_("{ranks} waits in {ops} at {places}") if len(waiting) == 1 else
                        N_("{ranks} wait in {ops} at {places}"))
            return {"outside_text": first[:1].upper() + first[1:],
                    "waiting_text": waits.format(ranks=_ranks_text(waiting, say), ops=say(N_(", ")).join(ops),
                                                 places=say(N_(", ")).join(sorted({seen[r].where.place(say)
                                                                                   for r in waiting}))),
                    "outside_ranks": _ranks_text(outside, say), "outside_hint": sentences(*(h[1] for h in hints))}

        fields = outside_fields(_as_is)
        return HangReport("rank_outside_collective", render(spec.summary, fields), render(spec.fix, fields),
                          spec.lesson, outside, dict(wheres), said=_said(spec.summary, spec.fix, outside_fields(_)))
    if waiting and len({(seen[r].where.op, seen[r].where.place()) for r in waiting}) > 1:
        spec = catalogue["collective_mismatch"]
        groups: dict[tuple[str | None, str], list[int]] = {}
        for r in waiting:
            groups.setdefault((seen[r].where.op, seen[r].where.place()), []).append(r)
        ordered = sorted(groups.items(), key=lambda item: (-len(item[1]), item[1]))
        odd = [r for _key, ranks in ordered[1:] for r in ranks]
        def mismatch_text(say: Callable[[str], str]) -> str:
            return say(N_(": ")) + say(N_(", ")).join(
                say(N_("{ranks} waits in {op} at {place}") if len(ranks) == 1 else
                    N_("{ranks} wait in {op} at {place}")).format(
                        ranks=_ranks_text(ranks, say), op=seen[ranks[0]].op(say),
                        place=seen[ranks[0]].where.place(say))
                for _key, ranks in ordered)

        english, said = _both(mismatch_text)
        summary = render(spec.summary, {"mismatch_text": english})
        return HangReport("collective_mismatch", summary, render(spec.fix, {}), spec.lesson, odd, dict(wheres),
                          said=_said(spec.summary, spec.fix, {"mismatch_text": said}))

    def unknown_summary(say: Callable[[str], str]) -> str:
        places = sorted({w.where.place(say) for w in seen.values()})
        if waiting and all(seen[r].where.category == "gpu" for r in waiting):
            return say(N_("every rank waits for the GPU at {places}: long kernels, or an NCCL collective that does not "
                          "finish (the Flight Recorder, where it ran, says whether one is pending).")).format(
                              places=say(N_(", ")).join(places))
        if waiting:
            return say(N_("every rank waits in {op} at {place}: the same call on every rank, so the stacks show no "
                          "culprit (a slow or broken network, or a rank of another node).")).format(
                              op=seen[waiting[0]].op(say), place=places[0])
        return say(N_("no rank is inside a collective; each rank's place is listed below."))

    summary, said_summary = _both(unknown_summary)
    return HangReport(None, summary, "", "14-when-it-goes-wrong", [], dict(wheres), said={"summary": said_summary})


def _as_is(text: str) -> str:
    return text


def _outside_hint(rank: int, where: RankWhere | None, exit_how: str | None = None,
                  say: Callable[[str], str] = _as_is) -> tuple[str, str]:
    """(where the rank is, what to do about it), said by `say` (English as is, or `_`)."""
    if where is None:
        if exit_how == "exit code 0":
            return (say(N_("rank {rank} has finished (exit code 0)")).format(rank=rank),
                    say(N_("rank {rank} ran out of work before the others: uneven batch counts per rank (use "
                           "DistributedSampler with drop_last=True, or DDP's join()), or a loop that ends early on one "
                           "rank.")).format(rank=rank))
        return (say(N_("rank {rank} has exited ({how})")).format(rank=rank, how=exit_how or say(N_("no exit recorded"))),
                say(N_("rank {rank} exited before the others: read its log (mgtutor runs show).")).format(rank=rank))
    w = where.where
    at = w.place(say)
    if w.category == "data":
        inner = where.worker.place(say) if where.worker is not None else say(N_("its worker processes"))
        return (say(N_("rank {rank} is in its data loading (DataLoader at {at}; a worker is in {inner})")).format(
                    rank=rank, at=at, inner=inner),
                say(N_("rank {rank}'s DataLoader is stuck: a worker waits in {inner}. Check the dataset's I/O "
                       "(a network disk, a lock, a download), give reads a timeout, and try num_workers=0 to see "
                       "the same wait in the main process.")).format(rank=rank, inner=inner))
    if w.category == "sleep":
        return (say(N_("rank {rank} sleeps at {at}")).format(rank=rank, at=at),
                say(N_("rank {rank} sleeps at {at}: remove the wait, or do it on every rank.")).format(rank=rank, at=at))
    if w.category == "init":
        return (say(N_("rank {rank} is still in init_process_group at {at}")).format(rank=rank, at=at),
                say(N_("rank {rank} never finished init_process_group: read its log.")).format(rank=rank))
    return (say(N_("rank {rank} runs its own code at {at}")).format(rank=rank, at=at),
            say(N_("rank {rank} is busy at {at} (a loop, or work only that rank does) and skipped or has not yet "
                   "reached the collective.")).format(rank=rank, at=at))


def _init_report(catalogue: dict[str, Any], seen: dict[int, RankWhere], world_size: int,
                 rank_env: dict[str, dict[str, str]]) -> HangReport:
    expected = sorted({int(v) for w in seen.values() for k, v in w.where.args.items()
                       if k in ("world_size", "group_size") and v.lstrip("-").isdigit() and int(v) > 0})
    env_sizes = sorted({int(e["WORLD_SIZE"]) for e in rank_env.values() if str(e.get("WORLD_SIZE", "")).isdigit()})
    launched = world_size or (env_sizes[0] if env_sizes else len(seen))
    setup_op = next((w.where.op for w in seen.values() if w.where.comm_setup), None)

    def places(say: Callable[[str], str]) -> str:
        return say(N_(", ")).join(sorted({w.where.place(say) for w in seen.values()}))

    def waits_in(say: Callable[[str], str]) -> str:
        return say(N_("{op}, where NCCL sets up its communicator")).format(op=setup_op) if setup_op \
            else "init_process_group"
    # past the store, creating the process group: every peer the group expects must connect now
    in_pg = all(w.where.comm_setup
                or w.where.inner in ("_new_process_group_helper", "_create_gloo_process_group", "_create_process_group_wrapper")
                or w.where.inner not in ("_create_c10d_store", "rendezvous", "_env_rendezvous_handler", None)
                for w in seen.values())
    if (expected and expected[-1] != launched) or (not expected and in_pg and len(seen) >= launched):
        spec = catalogue["world_size_mismatch"]
        def fields(say: Callable[[str], str]) -> dict[str, Any]:
            started = say(N_("1 rank started, it waits")) if launched == 1 else \
                say(N_("{count} ranks started, they wait")).format(count=launched)
            return {"started": started,
                    "expected": expected[-1] if expected else say(N_("more than {count}")).format(count=launched),
                    "waits_in": waits_in(say), "where": places(say)}

        english, theirs = _both(fields)
        summary = render(spec.summary, english)
        said = _said(spec.summary, spec.fix, theirs)
        if env_sizes:
            summary += f" (torchrun gave them WORLD_SIZE={env_sizes[0]})"
            said["summary"] += f" (WORLD_SIZE={env_sizes[0]})"
        return HangReport("world_size_mismatch", summary, spec.fix, spec.lesson, sorted(seen), dict(seen), said=said)
    if setup_op:
        summary = N_("every rank waits in {waits_in} at {where}: a rank of another node has not reached this call, "
                     "or NCCL cannot connect the nodes.")
        fix = N_("Check that every node was launched and reaches the same collective; if they do, set "
                 "NCCL_SOCKET_IFNAME to the network interface the nodes share (NCCL_DEBUG=INFO shows the one "
                 "NCCL picked).")
    else:
        summary = N_("every rank waits in init_process_group at {where}: the rendezvous store is not reachable, or a "
                     "rank of another node has not started.")
        fix = N_("Check MASTER_ADDR/MASTER_PORT (let torchrun set them) and that every node was launched.")
    english, theirs = _both(lambda say: say(summary).format(waits_in=waits_in(say), where=places(say)))
    return HangReport(None, english, fix, "14-when-it-goes-wrong", [], dict(seen),
                      said={"summary": theirs, "fix": _(fix)})
