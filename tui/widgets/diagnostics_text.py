"""Text for the Diagnostics screen: the checklist, the topology and table cells (Rich Text, never
markup, so a path or message with [brackets] shows as written)."""
from __future__ import annotations

from typing import Any

from rich.text import Text

from mgtutor.diagnostics.doctor.checks import say
from mgtutor.training.foundation.i18n import N_, _
from mgtutor.training.runs.nvml import said

MARKS = {"ok": ("✓", "green"), "warn": ("!", "yellow"), "fail": ("✗", "red")}
# nccl-tests' columns: out-of-place and in-place time and bus bandwidth, wrong elements
BENCH_COLUMNS = (N_("size"), N_("count"), N_("type"), N_("oop µs"), N_("oop busbw"), N_("in µs"), N_("in busbw"),
                 N_("#wrong"))
RANK_COLUMNS = ("rank", N_("status"), N_("joined s"), N_("init s"), N_("barrier s"), N_("all-reduce s"))


def checklist_text(report: dict[str, Any]) -> Text:
    v = report["versions"]
    text = Text()
    text.append(f"torch {v.get('torch') or '-'} · CUDA {v.get('cuda') or '-'} · cuDNN {v.get('cudnn') or '-'} · "
                f"NCCL {v.get('nccl') or '-'} · " + _("driver {version}").format(version=v.get("driver") or "-") + "\n",
                style="bold")
    host = report.get("host") or {}
    if host.get("os"):
        cpu = f" · {host['cpu_model']}" if host.get("cpu_model") else ""
        text.append(f"{host['os']} · " + _("kernel {version}").format(version=host.get("kernel") or "?") + cpu + " · " +
                    _("{count} CPUs").format(count=host.get("cpus") or "?") + "\n", style="dim")
    text.append("\n")
    for check in report["checks"]:
        mark, style = MARKS[check["status"]]
        text.append(f" {mark} ", style=f"bold {style}")
        text.append(f"{say(check, 'message')}\n")
        if check.get("fix") and check["status"] != "ok":
            text.append("     " + _("fix: {fix}").format(fix=say(check, "fix")) + "\n", style="dim")
    env = report.get("environment") or {}
    if env:
        text.append("\n" + _("set: {variables}").format(variables=" ".join(f"{k}={val}" for k, val in env.items()))
                    + "\n", style="dim")
    return text


def topology_text(report: dict[str, Any]) -> Text:
    text = Text()
    gpus = report.get("gpus") or []
    if not gpus:
        text.append(_("No NVIDIA GPU: {error}.\nRanks run as CPU processes on gloo; "
                      "there is no GPU link to show.\n").format(error=said(report.get("gpu_error"))))
        return text
    for g in gpus:
        mem = f"{g['memory_total_mib'] / 1024:.0f} GiB" if g.get("memory_total_mib") else "?"
        nvl = _(", NVLink {links} up").format(links=g["nvlink_links_up"]) if g.get("nvlink_links_up") else ""
        text.append(f"GPU{g['index']} {g['name']} {mem}, sm {g.get('compute_capability') or '?'}, "
                    f"PCIe gen{g.get('pcie_gen') or '?'} ×{g.get('pcie_width') or '?'}{nvl}\n")
    text.append("\n" + report["topology"]["matrix"] + "\n\n")
    for check in report["checks"]:
        if check["id"].startswith("link_"):
            mark, style = MARKS[check["status"]]
            text.append(f" {mark} ", style=f"bold {style}")
            text.append(f"{say(check, 'message')}\n")
    return text


def _wrong(value: int | None) -> str:
    return "N/A" if value is None else str(value)


def bench_cells(rows: list[dict[str, Any]]) -> tuple[str, ...]:
    from mgtutor.diagnostics.bench.sizes import format_size

    oop, ip = rows[0], rows[-1]
    wrong = "N/A" if oop["wrong"] is None and ip["wrong"] is None else str((oop["wrong"] or 0) + (ip["wrong"] or 0))
    return (format_size(oop["bytes"]), str(oop["count"]), oop["dtype"], f"{oop['time_us']:.2f}",
            f"{oop['busbw_gbps']:.2f}", f"{ip['time_us']:.2f}", f"{ip['busbw_gbps']:.2f}", wrong)


def rank_cells(entry: dict[str, Any]) -> tuple[str, ...]:
    def sec(key: str) -> str:
        return "-" if entry.get(key) is None else f"{entry[key]:.3f}"
    said = {"missing": N_("never joined"), "skipped": N_("told not to join"), "waiting": N_("arrived, waited"),
            "joined": N_("joined"), "wrong sum": N_("wrong sum")}
    status = _(said.get(entry["status"], entry["status"]))
    return (str(entry["rank"]), status, sec("joined_s"), sec("init_s"), sec("barrier_s"), sec("allreduce_s"))
