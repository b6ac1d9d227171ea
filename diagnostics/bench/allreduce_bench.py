"""`mgtutor bench allreduce`, the parent side: launch the worker on N ranks, follow its rows as
they come, format them like nccl-tests, and judge the result against the link NVML reports.
Headless and torch-free (the worker is the only part that imports torch)."""
from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mgtutor.training.runs import nvml
from mgtutor.diagnostics.bench.sizes import format_size, sweep
from mgtutor.diagnostics.doctor.topology import Topology, describe_link, link_gbps, read_topology
from mgtutor.training.runs.events.types import BenchResultEvent, BenchRowsEvent
from mgtutor.training.runs.launch.launcher import LaunchSpec, Run, launch, plan
from mgtutor.training.runs.records.record import RunStatus
from mgtutor.training.runs.follow.session import RunSession
from mgtutor.training.foundation.i18n import N_, _, sentences
from mgtutor.training.foundation.said import SaidReport

GOOD_SHARE, LOW_SHARE = 0.6, 0.3  # busbw / nominal one-way link rate
PEAK_MIN_BYTES = 64 << 20         # below this even NVLink does not reach its peak


@dataclass
class BenchOptions:
    nproc: int | None = None
    backend: str = "auto"
    min_bytes: int = 8
    max_bytes: int | None = None   # default depends on the backend
    factor: float = 2.0
    iters: int = 20
    warmup: int = 5
    dtype: str = "float"
    check: bool = False
    graph: str = "auto"
    oop: str = "auto"

    def sizes(self, backend: str) -> list[int]:
        top = self.max_bytes or ((256 << 20) if backend == "nccl" else (4 << 20))
        return sweep(self.min_bytes, max(top, self.min_bytes), self.factor)

    def target(self, backend: str) -> list[str]:
        argv = ["-m", "mgtutor.training.worker.probes.allreduce", "--sizes", ",".join(map(str, self.sizes(backend))),
                "--dtype", self.dtype, "--iters", str(self.iters), "--warmup", str(self.warmup),
                "--graph", self.graph, "--oop", self.oop]
        return argv + (["--check"] if self.check else [])


def start(options: BenchOptions) -> Run:
    """Launch the worker (raises LaunchError for bad input, with the fix)."""
    spec = LaunchSpec(target=[], nproc=options.nproc, backend=options.backend, label="allreduce")
    spec.target = options.target(plan(spec).backend)
    return launch(spec)


def collect(run: Run, on_rows: Callable[[list[dict[str, Any]]], None] | None = None,
            topology: Topology | None = None) -> BenchReport:
    """Follow `run` to its end; `on_rows` gets each size's [out-of-place, in-place] rows live."""
    rows: list[dict[str, Any]] = []
    info: BenchResultEvent | None = None
    final = None
    for update in RunSession(run.record, run).updates():
        for event in update.events:
            if isinstance(event, BenchRowsEvent):
                size_rows = [row.to_json() for row in event.rows]
                rows.extend(size_rows)
                if on_rows:
                    on_rows(size_rows)
            elif isinstance(event, BenchResultEvent):
                info = event
        if update.final:
            final = update
    assert final is not None and final.result is not None
    result = final.result
    meta = run.record.meta()
    backend, world = meta.backend, meta.world_size
    topo = topology if topology is not None else (read_topology() if backend == "nccl" else Topology())
    failed = result.status != RunStatus.FINISHED or not rows

    def said(say: Callable[[str], str]) -> tuple[str, str | None, str | None]:
        text, link = verdict(backend, world, rows, topo, say)
        if not failed:
            return text, link, None
        first = result.first_failure
        error = say(N_("the bench did not finish (status {status}{first}); logs: {path}")).format(
            status=result.status, path=run.record.path,
            first=say(N_(", rank {rank} failed first")).format(rank=first.rank) if first else "")
        return (error if not rows else sentences(error + say(N_(".")), text)), link, error

    text, link, error = said(str)
    busbws = [r["busbw_gbps"] for r in rows]
    device = info.device if info and info.device else meta.device_note
    report = BenchReport({"backend": backend, "world_size": world, "device": device,
                          "dtype": rows[0]["dtype"] if rows else None, "graph": info.graph if info else None,
                          "oop_method": info.oop_method if info else None, "rows": rows, "link": link,
                          "avg_busbw_gbps": round(sum(busbws) / len(busbws), 2) if busbws else None,
                          "verdict": text, "run_id": run.record.run_id, "error": error})
    report.say = lambda say: said(say)[0]
    return report


class BenchReport(SaidReport):
    """The report (printed by --json, saved): English; `said` is its verdict in the language in force."""

    kept_key = "verdict"


def _used_gpu_indices(world: int) -> list[int]:
    """NVML indices of the GPUs ranks 0..world-1 land on (CUDA_VISIBLE_DEVICES honoured)."""
    count = nvml.query("nvmlDeviceGetCount", default=0) or 0
    uuids = {i: nvml.query("nvmlDeviceGetUUID", nvml.query("nvmlDeviceGetHandleByIndex", i)) for i in range(count)}
    return nvml._visible(sorted(uuids), uuids)[:world]


def verdict(backend: str, world: int, rows: list[dict[str, Any]], topo: Topology,
            say: Callable[[str], str] = str) -> tuple[str, str | None]:
    """One paragraph relating the large-message busbw to the link; and the link in words. In English
    (the report's record) unless `say` translates; the link stays English (a JSON value)."""
    if not rows:
        return say(N_("no result rows")), None
    largest = max(r["bytes"] for r in rows)
    best = max(r["busbw_gbps"] for r in rows if r["bytes"] == largest)
    at = say(N_("{gbps:.1f} GB/s busbw at {size}")).format(gbps=best, size=format_size(largest))
    wrong = sum(r["wrong"] or 0 for r in rows)
    notes = [say(N_("VALIDATION FAILED: {wrong} wrong element(s): these results cannot be trusted")).format(
        wrong=wrong)] if wrong else []
    if world < 2:
        return " ".join(notes + [say(N_("one rank: nothing crosses a link, so busbw is 0 by definition; use --nproc 2 "
                                        "or more"))]), None
    if backend != "nccl":
        return " ".join(notes + [say(N_("gloo on CPU: {at} through shared memory / loopback TCP — a CPU baseline, "
                                        "not a GPU link measurement")).format(at=at)]), "CPU (gloo)"
    pair = topo.weakest_link(_used_gpu_indices(world) or None)
    if pair is None:
        return " ".join(notes + [say(N_("NCCL: {at}; the GPU link is unknown (NVML gave no topology)")).format(
            at=at)]), None
    link, nominal = describe_link(topo, pair), link_gbps(topo, pair)
    shown = describe_link(topo, pair, say)
    if largest < PEAK_MIN_BYTES:
        notes.append(say(N_("the largest message ({size}) is too small to reach peak bandwidth: add -e 1G or "
                            "more")).format(size=format_size(largest)))
    if not nominal:
        return " ".join(notes + [f"{shown}: {at}"]), link
    share = best / nominal
    head = say(N_("{link}: {at} = {share:.0%} of the link's one-way rate")).format(link=shown, at=at, share=share)
    if share >= GOOD_SHARE:
        body = say(N_("in line with what NCCL reaches on this link"))
    elif share >= LOW_SHARE:
        body = say(N_("below what this link usually gives: check that nothing else uses these GPUs, that no "
                      "NCCL_ALGO/NCCL_PROTO/NCCL_P2P_* variable is set, and that the sweep reaches 1G or more"))
    else:
        body = say(N_("far below the link: NCCL is probably not using it — look for NCCL_P2P_DISABLE, blocked P2P "
                      "(PCIe ACS/IOMMU), or run with NCCL_DEBUG=INFO and read which transport it picks (P2P/IPC, "
                      "SHM, NET)"))
    return " ".join(notes + [say(N_("{head} — {body}.")).format(head=head, body=body)]), link


HEADER = ("#                                               out-of-place                       in-place\n"
          "#       size         count      type     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n"
          "#        (B)    (elements)               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)")


def bounds_line(rows: list[dict[str, Any]]) -> str:
    """nccl-tests' "Out of bounds values" line; N/A when no row was checked (without --check #wrong is N/A)."""
    checked = [r["wrong"] for r in rows if r["wrong"] is not None]
    if not checked:
        return "# Out of bounds values : N/A (results not checked; --check counts wrong elements)"
    wrong = sum(checked)
    return f"# Out of bounds values : {wrong} {'OK' if not wrong else 'FAILED'}"


def _wrong(value: int | None) -> str:
    return "N/A" if value is None else str(value)


def format_pair(rows: list[dict[str, Any]]) -> str:
    """One nccl-tests line from a size's [out-of-place, in-place] rows."""
    oop, ip = rows[0], rows[-1]
    cols = f"{oop['bytes']:>12} {oop['count']:>13} {oop['dtype']:>9}"
    for r in (oop, ip):
        cols += f" {r['time_us']:>8.2f} {r['algbw_gbps']:>7.2f} {r['busbw_gbps']:>7.2f} {_wrong(r['wrong']):>6}"
    return cols


def env_note() -> str:
    keys = [k for k in sorted(os.environ) if k.startswith("NCCL_")]
    return ", ".join(f"{k}={os.environ[k]}" for k in keys)
