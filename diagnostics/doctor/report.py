"""`mgtutor doctor`: is this machine ready for multi-GPU training? Every item ok / warn / fail,
with the fix beside what is not ok. Torch facts come from a child process (the torchfacts worker), GPU facts
from NVML, host facts from the OS; the text form is meant to be pasted into a bug report.
"""
from __future__ import annotations

import os
import platform
import resource
import socket
import sys
import time
from typing import Any

import psutil

from mgtutor.training.runs import nvml
from mgtutor.training.foundation.i18n import N_, _

from mgtutor.diagnostics.doctor import hostinfo, versions
from mgtutor.diagnostics.doctor.checks import run_checks, say
from mgtutor.diagnostics.doctor.state_folder import state_folder_facts
from mgtutor.diagnostics.meters import gpu_handles
from mgtutor.training.foundation.secrets import redact_env
from mgtutor.diagnostics.doctor.topology import LEGEND, read_topology

ENV_PREFIXES = ("NCCL_", "TORCH_", "MASTER_", "GLOO_", "PYTORCH_")
ENV_NAMES = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "OMP_NUM_THREADS", "WORLD_SIZE", "RANK", "LOCAL_RANK",
             "LD_LIBRARY_PATH")
MIB = 1 << 20


def _limit(which: int) -> dict[str, int | None]:
    """Soft and hard limit; None means unlimited."""
    soft, hard = resource.getrlimit(which)
    fix = lambda v: None if v == resource.RLIM_INFINITY else int(v)  # noqa: E731
    return {"soft": fix(soft), "hard": fix(hard)}


def os_name() -> str:
    """"Ubuntu 22.04.4 LTS" from os-release where there is one, else what platform knows."""
    try:
        return platform.freedesktop_os_release().get("PRETTY_NAME") or platform.system()
    except OSError:
        return platform.system() or "unknown"


def cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as info:
            for line in info:
                if line.lower().startswith(("model name", "hardware", "cpu model")):
                    return line.split(":", 1)[1].strip() or None
    except OSError:
        pass
    return None  # (platform.processor() would start `uname -p`; the model name is all we want)


def host_facts() -> dict[str, Any]:
    shm_total: int | None
    shm_free: int | None
    try:
        shm = os.statvfs("/dev/shm")
        shm_total = shm.f_blocks * shm.f_frsize // MIB
        shm_free = shm.f_bavail * shm.f_frsize // MIB
    except OSError:
        shm_total = shm_free = None
    memory = psutil.virtual_memory()
    return {
        "hostname": socket.gethostname(), "os": os_name(), "kernel": platform.release(),
        "arch": platform.machine(),  # (platform.platform() would start `uname -p`)
        "libc": " ".join(platform.libc_ver()).strip() or None,
        "cpu_model": cpu_model(), "cpus": os.cpu_count(),
        "cpu_cores": os.cpu_count(), "cpu_physical_cores": psutil.cpu_count(logical=False),
        "cpu_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "ram_total_mib": memory.total // MIB, "ram_available_mib": memory.available // MIB,
        "shm_total_mib": shm_total, "shm_free_mib": shm_free,
        "nofile_limit": _limit(resource.RLIMIT_NOFILE), "memlock_limit": _limit(resource.RLIMIT_MEMLOCK),
        "cpu": hostinfo.cpu_details(), "state_folder": state_folder_facts(),
    }


def environment() -> dict[str, str]:
    """The variables that change how distributed PyTorch behaves, as set now; a secret's value never
    (TORCH_HUB_TOKEN is under TORCH_)."""
    return redact_env({k: v for k, v in sorted(os.environ.items()) if k.startswith(ENV_PREFIXES) or k in ENV_NAMES})


def _capability(handle: Any) -> str | None:
    cap = nvml.query("nvmlDeviceGetCudaComputeCapability", handle)
    return f"{cap[0]}.{cap[1]}" if cap else None


def gpu_facts(topology_gpus: list[Any]) -> list[dict[str, Any]]:
    links = {g.index: g for g in topology_gpus}
    gpus = []
    for index, handle in gpu_handles():
        memory = nvml.query("nvmlDeviceGetMemoryInfo", handle)
        link = links.get(index)
        gpus.append({
            "index": index, "name": nvml.query("nvmlDeviceGetName", handle, default="NVIDIA GPU"),
            "uuid": nvml.query("nvmlDeviceGetUUID", handle),
            "memory_total_mib": None if memory is None else int(memory.total) // MIB,
            "compute_capability": _capability(handle),
            "bus_id": link.bus_id if link else None,
            "pcie_gen": link.pcie_gen if link else None, "pcie_width": link.pcie_width if link else None,
            "pcie_max_gen": link.pcie_max_gen if link else None,
            "pcie_max_width": link.pcie_max_width if link else None,
            "nvlink_links_up": link.nvlink_links_up if link else None,
        })
    return gpus


def _driver_cuda() -> str | None:
    version = nvml.query("nvmlSystemGetCudaDriverVersion")
    return None if not version else f"{version // 1000}.{version % 1000 // 10}"


def _cpu_box_cuda_bytes(facts: dict[str, Any], gpus: list[Any]) -> int | None:
    """What torch's CUDA build takes on a machine with no GPU to use it (read where mgtutor's Python is
    torch's: the metadata read is this interpreter's)."""
    if gpus or not facts.get("cuda") or facts.get("executable", sys.executable) != sys.executable:
        return None
    return versions.torch_install_bytes()


def collect(torch: dict[str, Any] | None = None) -> dict[str, Any]:
    """The whole report as JSON-ready data. `torch` = facts already gathered (else asked now)."""
    facts = torch if torch is not None else versions.gather()
    topo = read_topology()
    gpus = gpu_facts(topo.gpus)
    report: dict[str, Any] = {
        "generated": time.time(),
        "versions": {
            "python": platform.python_version(), "torch": facts.get("torch"), "cuda": facts.get("cuda"),
            "cudnn": facts.get("cudnn"), "nccl": facts.get("nccl"),
            "driver": nvml.query("nvmlSystemGetDriverVersion"), "driver_cuda": _driver_cuda(),
            "torch_debug": facts.get("debug"),
            "cuda_runtime": facts.get("cuda_runtime"), "cuda_runtime_from": facts.get("cuda_runtime_from"),
            "mgtutor_python": sys.executable, "torch_python": facts.get("python"),
            "torch_install_bytes": _cpu_box_cuda_bytes(facts, gpus),
        },
        "gpus": gpus,
        "gpu_error": None if gpus else (topo.error or nvml.init_error() or "NVML sees no GPU"),
        "topology": {**topo.to_json(), "matrix": topo.matrix()},
        "torch": facts,
        "environment": environment(),
        "host": {**host_facts(), "gcc": facts.get("gcc"), "cmake": facts.get("cmake"), "clang": facts.get("clang")},
        "allocator": hostinfo.allocator_config(dict(os.environ)),
        "packages": facts.get("packages") or versions.package_versions(),
    }
    report["checks"] = run_checks(report, topo)
    return report


def worst(report: dict[str, Any]) -> str:
    statuses = {c["status"] for c in report["checks"]}
    return "fail" if "fail" in statuses else ("warn" if "warn" in statuses else "ok")


MARKS = {"ok": "✓", "warn": "!", "fail": "✗"}
VERDICTS = {"ok": N_("ok"), "warn": N_("warn"), "fail": N_("fail")}


def render_text(report: dict[str, Any]) -> str:
    """The plain-text report (for a terminal or a bug report)."""
    v = report["versions"]
    host = report["host"]
    out = [_("mgtutor doctor — is this machine ready for multi-GPU training?"), "",
           _("Host: {host}").format(host=host_line(host)), "",
           _("Versions"),
           f"  Python {v['python']}   torch {v['torch'] or '-'}   CUDA (torch) {v['cuda'] or '-'}   "
           f"cuDNN {v['cudnn'] or '-'}   NCCL {v['nccl'] or '-'}",
           "  " + _("NVIDIA driver {driver} (supports CUDA {cuda})   torch debug build {debug}   GCC {gcc}").format(
               driver=v["driver"] or "-", cuda=v["driver_cuda"] or "-", debug=_("yes") if v.get("torch_debug") else _("no"),
               gcc=_gcc_short(host.get("gcc"))),
           "", _("GPUs")]
    if not report["gpus"]:
        out.append("  " + _("no NVIDIA GPU: {error} — ranks run on the CPU with gloo").format(
            error=nvml.said(report["gpu_error"])))
    for g in report["gpus"]:
        mem = f"{g['memory_total_mib'] / 1024:.0f} GiB" if g["memory_total_mib"] else "? GiB"
        pcie = f"PCIe gen{g['pcie_gen']} ×{g['pcie_width']}" if g["pcie_gen"] else "PCIe ?"
        nvl = _(", NVLink {count} links up").format(count=g["nvlink_links_up"]) if g["nvlink_links_up"] else ""
        out.append(f"  GPU{g['index']}  {g['name']}  {mem}  sm {g['compute_capability'] or '?'}  {pcie}{nvl}")
    out += ["", _("Topology")] + ["  " + line for line in topology_lines(report["topology"])]
    shm = f"{host['shm_total_mib'] / 1024:.1f} GiB" if host["shm_total_mib"] is not None else _("none")
    out += ["", _("Host"),
            "  " + _("{cores} CPU cores ({usable} usable), RAM {ram:.1f} GiB, /dev/shm {shm}, open files {files}, "
                     "locked memory {locked}").format(
                cores=host["cpu_cores"], usable=host["cpu_usable"], ram=host["ram_total_mib"] / 1024, shm=shm,
                files=_fmt_limit(host["nofile_limit"]["soft"]), locked=_fmt_limit(host["memlock_limit"]["soft"], "B")),
            "", _("Packages")]
    out += package_lines(report.get("packages") or {})
    out += hostinfo.report_lines(report)
    out += ["", _("Environment")]
    out += [f"  {k}={val}" for k, val in report["environment"].items()] or [
        "  " + _("(no NCCL_*, TORCH_*, PYTORCH_*, MASTER_*, CUDA_VISIBLE_DEVICES, LD_LIBRARY_PATH… set)")]
    out += ["", _("Checks")]
    for check in report["checks"]:
        out.append(f"  {MARKS[check['status']]} {say(check, 'message')}")
        if check["fix"] and check["status"] != "ok":
            out.append("      " + _("fix: {fix}").format(fix=say(check, "fix")))
    out += ["", _("verdict: {verdict}").format(verdict=_(VERDICTS[worst(report)]))]
    return "\n".join(out)


def topology_lines(topology: dict[str, Any]) -> list[str]:
    """The grid as kept in the report, its legend and the no-GPU line in the language in force."""
    if not topology.get("gpus"):
        error = topology.get("error")
        return [_("(no GPU topology: {error})").format(error=nvml.said(error) if error else _("no GPU"))]
    return [_(line) if line == LEGEND else line for line in topology["matrix"].splitlines()]


def render_markdown(report: dict[str, Any]) -> str:
    """The text report in a fenced block under a heading: pasted into a GitHub issue as is, it stays aligned."""
    return f"### mgtutor doctor ({worst(report)})\n\n```text\n{render_text(report)}\n```\n"


def _gcc_short(line: str | None) -> str:
    return line.split()[-1] if line else "-"


def host_line(host: dict[str, Any]) -> str:
    """One line: OS, kernel, libc, CPU — what a bug report's reader asks first."""
    parts = [host.get("os") or "?", _("kernel {version}").format(version=host["kernel"]) if host.get("kernel") else "",
             host.get("arch") or "", host.get("libc") or "", host.get("cpu_model") or "",
             _("{count} CPUs").format(count=host.get("cpus")) if host.get("cpus") else ""]
    return _(", ").join(p for p in parts if p)


def package_lines(packages: dict[str, str], width: int = 76) -> list[str]:
    """name==version, packed on lines of at most `width` columns."""
    lines, line = [], ""
    for name, version in packages.items():
        item = f"{name}=={version}"
        if line and len(line) + 3 + len(item) > width:
            lines.append("  " + line)
            line = item
        else:
            line = f"{line}   {item}" if line else item
    if line:
        lines.append("  " + line)
    return lines or ["  " + _("(no package metadata found)")]


def _fmt_limit(value: int | None, unit: str = "") -> str:
    if value is None:
        return _("unlimited")
    if unit == "B":
        return f"{value // 1024} KiB" if value < MIB else f"{value // MIB} MiB"
    return str(value)
