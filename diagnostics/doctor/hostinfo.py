"""The CPU as `lscpu` and torch's collect_env describe it, read from /proc and /sys (no process started).

Why the doctor asks: CPU ranks on gloo share these cores (sockets × cores × threads says how many
really run at once), the data loader's workers too; NUMA nodes decide where a rank's memory should
live; avx512 / AMX decide which kernels a CPU build of torch can use; a hypervisor explains
topology that a VM invents.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mgtutor.training.foundation.i18n import N_, _
from mgtutor.training.foundation.linebreak import wrap_cells

# The instruction-set flags that change what torch's CPU kernels can use (x86, then Arm).
FLAGS_THAT_MATTER = ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512_vnni", "avx512_bf16",
                     "avx512_fp16", "avx_vnni", "amx_tile", "amx_bf16", "amx_int8", "amx_fp16",
                     "asimd", "sve", "sve2", "bf16", "i8mm")


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return None


def parse_cpuinfo(text: str) -> list[dict[str, str]]:
    """/proc/cpuinfo as one dict per logical CPU ("processor" blocks)."""
    blocks: list[dict[str, str]] = []
    current: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if current:
                blocks.append(current)
                current = {}
            continue
        key, _, value = line.partition(":")
        current[key.strip().lower()] = value.strip()
    if current:
        blocks.append(current)
    return [b for b in blocks if "processor" in b] or blocks


def _int(value: str | None) -> int | None:
    return int(value) if value is not None and value.strip().isdigit() else None


def caches(sys_root: Path) -> list[dict[str, Any]]:
    """cpu0's caches, one per level and type: {"level": 1, "type": "Data", "size": "48K", "shared_by": 2}."""
    found = []
    folder = sys_root / "devices" / "system" / "cpu" / "cpu0" / "cache"
    for index in sorted(folder.glob("index[0-9]*")):
        level, kind, size = (_read(index / name) for name in ("level", "type", "size"))
        shared = _read(index / "shared_cpu_list")
        if level and size:
            found.append({"level": _int(level), "type": kind, "size": size,
                          "shared_by": _count_cpus(shared) if shared else None})
    return found


def _count_cpus(cpu_list: str) -> int:
    """"0-3,8-11" → 8."""
    total = 0
    for part in cpu_list.split(","):
        low, _, high = part.partition("-")
        if low.strip().isdigit():
            total += (int(high) - int(low) + 1) if high.strip().isdigit() else 1
    return total


def numa_nodes(sys_root: Path) -> int | None:
    folder = sys_root / "devices" / "system" / "node"
    nodes = [p for p in folder.glob("node*") if re.fullmatch(r"node\d+", p.name)]
    return len(nodes) or None


def hypervisor(flags: set[str], sys_root: Path) -> str | None:
    """None on bare metal (no `hypervisor` CPU flag); else who, where the machine says (Xen, KVM, …)."""
    if "hypervisor" not in flags:
        return None
    named = _read(sys_root / "hypervisor" / "type")
    if named:
        return named
    dmi = [_read(sys_root / "class" / "dmi" / "id" / name) for name in ("sys_vendor", "product_name")]
    said = " ".join(d for d in dmi if d)
    return said or UNNAMED_HYPERVISOR


UNNAMED_HYPERVISOR = N_("yes (the guest does not say which)")


def cpu_details(cpuinfo_text: str | None = None, sys_root: Path = Path("/sys")) -> dict[str, Any]:
    """Vendor, family/model/stepping, sockets × cores × threads, caches, NUMA nodes, flags, hypervisor."""
    text = cpuinfo_text if cpuinfo_text is not None else (_read(Path("/proc/cpuinfo")) or "")
    cpus = parse_cpuinfo(text)
    first = cpus[0] if cpus else {}
    flags = set((first.get("flags") or first.get("features") or "").split())
    sockets = {c.get("physical id") for c in cpus if c.get("physical id") is not None}
    cores = _int(first.get("cpu cores"))
    siblings = _int(first.get("siblings"))
    threads = siblings // cores if cores and siblings and siblings % cores == 0 else None
    return {
        "vendor": first.get("vendor_id") or first.get("cpu implementer"),
        "family": _int(first.get("cpu family")) if "cpu family" in first else first.get("cpu architecture"),
        "model": _int(first.get("model")) if (first.get("model") or "").isdigit() else first.get("cpu part"),
        "model_name": first.get("model name"),
        "stepping": _int(first.get("stepping")),
        "logical_cpus": len(cpus) or None,
        "sockets": len(sockets) or None,
        "cores_per_socket": cores,
        "threads_per_core": threads,
        "caches": caches(sys_root),
        "numa_nodes": numa_nodes(sys_root),
        "flags": [f for f in FLAGS_THAT_MATTER if f in flags],
        "hypervisor": hypervisor(flags, sys_root),
    }


def cpu_lines(cpu: dict[str, Any], width: int = 78) -> list[str]:
    """The CPU for the text report, wrapped to `width` terminal cells (80 with the indent): a Chinese
    character takes two, and a line breaks between words or Chinese characters, never inside a name."""
    ident = " ".join(str(p) for p in (
        cpu.get("vendor"), _("family {value}").format(value=cpu["family"]) if cpu.get("family") is not None else "",
        _("model {value}").format(value=cpu["model"]) if cpu.get("model") is not None else "",
        _("stepping {value}").format(value=cpu["stepping"]) if cpu.get("stepping") is not None else "") if p)
    shape = " × ".join(_(w).format(count=v) for v, w in (
        (cpu.get("sockets"), N_("{count} socket(s)")), (cpu.get("cores_per_socket"), N_("{count} cores")),
        (cpu.get("threads_per_core"), N_("{count} thread(s) per core"))) if v)
    cache = " ".join(f"L{c['level']}{_short_type(c['type'])} {c['size']}" for c in cpu.get("caches") or [])
    numa = _("{count} NUMA node(s)").format(count=cpu["numa_nodes"]) if cpu.get("numa_nodes") else _("NUMA nodes ?")
    virt = (_("hypervisor: {name}").format(name=_(cpu["hypervisor"]) if cpu["hypervisor"] == UNNAMED_HYPERVISOR
                                           else cpu["hypervisor"])
            if cpu.get("hypervisor") else _("no hypervisor (bare metal)"))
    flags = " ".join(cpu.get("flags") or []) or _("none of avx2/avx512/amx")
    text = [_("CPU {ident}: {shape}").format(ident=ident or "?", shape=shape or _("? cores")),
            _("{numa}; {hypervisor}").format(numa=numa, hypervisor=virt),
            _("caches {caches}").format(caches=cache or "?"), _("flags {flags}").format(flags=flags)]
    return ["  " + line for part in text for line in wrap_cells(part, width, subsequent_indent="  ")]


def _short_type(kind: str | None) -> str:
    return {"Data": "d", "Instruction": "i"}.get(kind or "", "")


ALLOC_VARS = ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF")  # the second is torch ≥ 2.9's name for the first


def allocator_config(env: dict[str, str]) -> dict[str, str | None]:
    """How the caching allocator is tuned (expandable_segments, max_split_size_mb, …): an OOM's first question."""
    return {name: env.get(name) for name in ALLOC_VARS}


def report_lines(report: dict[str, Any]) -> list[str]:
    """The doctor's text for what collect_env prints beyond the versions: CPU, CUDA runtime, build tools, allocator."""
    host, versions = report["host"], report["versions"]
    out = ["", _("CPU, build tools, allocator")]
    out += cpu_lines(host.get("cpu") or {})
    runtime = versions.get("cuda_runtime")
    runtime_text = f"{runtime} ({versions.get('cuda_runtime_from')})" if runtime else _("- (no nvcc, no cuda-runtime wheel)")
    out.append("  " + _("CUDA runtime {runtime}   CMake {cmake}   Clang {clang}").format(
        runtime=runtime_text, cmake=_version_word(host.get("cmake")), clang=_version_word(host.get("clang"))))
    conf = {k: v for k, v in (report.get("allocator") or {}).items() if v}
    out.append("  " + _("allocator {setting}").format(setting=", ".join(f"{k}={v}" for k, v in conf.items()) if conf
                                                      else _("PYTORCH_CUDA_ALLOC_CONF unset (PyTorch's defaults)")))
    return out


def _version_word(line: str | None) -> str:
    """"cmake version 3.25.1" → "3.25.1"; "Ubuntu clang version 18.1.3 (1ubuntu1)" → "18.1.3"."""
    if not line:
        return "-"
    found = re.search(r"version (\S+)", line)
    return found.group(1) if found else line.split()[-1]
