"""The doctor's judgements: each turns facts into {"id", "status", "message", "fix"}."""
from __future__ import annotations

import re
from typing import Any

import psutil

from mgtutor.diagnostics.doctor.topology import Topology, describe_link

Check = dict[str, Any]
MIN_TORCH = (2, 4)


def check(id_: str, status: str, message: str, fix: str | None = None) -> Check:
    return {"id": id_, "status": status, "message": message, "fix": fix}


def _version_tuple(text: str | None) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", text or "")[:3])


def _arch_supported(capability: str, arch_list: list[str]) -> bool:
    """sm_XY runs on the same major with minor ≥ Y; compute_XY (PTX) runs on anything ≥ XY."""
    major, minor = (int(x) for x in capability.split("."))
    for arch in arch_list:
        kind, _, digits = arch.partition("_")
        if not digits[:-1].isdigit():
            continue
        a_major, a_minor = int(digits[:-1]), int(digits[-1])
        if kind == "sm" and a_major == major and a_minor <= minor:
            return True
        if kind == "compute" and (a_major, a_minor) <= (major, minor):
            return True
    return False


def software_checks(report: dict[str, Any]) -> list[Check]:
    v, facts, gpus = report["versions"], report["torch"], report["gpus"]
    out = [check("python", "ok", f"Python {v['python']}")]
    if facts.get("torch_error"):
        out.append(check("torch", "fail", f"torch cannot be imported: {facts['torch_error']}",
                         "pip install torch (pick the CUDA build for your driver at pytorch.org)"))
        return out
    torch_v = _version_tuple(v["torch"])
    out.append(check("torch", "ok" if torch_v[:2] >= MIN_TORCH else "warn", f"torch {v['torch']}",
                     None if torch_v[:2] >= MIN_TORCH else "upgrade to torch 2.4 or newer: pip install -U torch"))
    if not facts.get("distributed"):
        out.append(check("distributed", "fail", "this torch build has no torch.distributed",
                         "install an official torch wheel (Linux builds include distributed)"))
    if not gpus:
        out.append(check("gpu", "warn", f"no NVIDIA GPU ({report['gpu_error']}): ranks will be CPU processes on gloo",
                         "for GPU training install the NVIDIA driver on a machine with NVIDIA GPUs; "
                         "everything in mgtutor still works on the CPU"))
        if facts.get("gloo_available"):
            out.append(check("gloo", "ok", "gloo backend available (CPU collectives)"))
        return out
    out.append(check("gpu", "ok", f"{len(gpus)} NVIDIA GPU(s): " + ", ".join(sorted({g['name'] for g in gpus}))))
    torch_cuda, driver_cuda = _version_tuple(v["cuda"]), _version_tuple(v["driver_cuda"])
    if not v["cuda"]:
        out.append(check("torch_cuda", "fail", f"torch {v['torch']} is a CPU-only build",
                         "install a CUDA build: pip install torch --index-url https://download.pytorch.org/whl/cu126"))
    elif driver_cuda and driver_cuda[:2] < torch_cuda[:2]:
        same_major = driver_cuda[:1] == torch_cuda[:1]
        out.append(check("driver", "warn" if same_major else "fail",
                         f"driver {v['driver']} supports CUDA {v['driver_cuda']}, torch was built for CUDA {v['cuda']}",
                         "update the NVIDIA driver, or install the torch build for CUDA "
                         f"{v['driver_cuda']} or older"))
    else:
        out.append(check("driver", "ok", f"driver {v['driver']} (CUDA {v['driver_cuda'] or '?'}) runs torch's CUDA {v['cuda']}"))
    if v["cuda"]:
        if facts.get("cuda_available"):
            out.append(check("cuda", "ok", f"torch sees {facts.get('device_count')} CUDA device(s)"))
        else:
            why = facts.get("cuda_error") or "torch.cuda.is_available() is False"
            out.append(check("cuda", "fail", f"NVML sees GPUs but torch cannot use CUDA: {why}",
                             "check CUDA_VISIBLE_DEVICES, the driver version, and that no other CUDA library "
                             "shadows torch's (LD_LIBRARY_PATH)"))
        for g in gpus:
            cap, arch = g.get("compute_capability"), facts.get("arch_list") or []
            if cap and arch and not _arch_supported(cap, arch):
                out.append(check(f"arch_gpu{g['index']}", "fail",
                                 f"GPU{g['index']} (sm {cap}) is not in this torch build's arch list {' '.join(arch)}",
                                 "install a torch build compiled for this GPU (newer wheel or matching CUDA version)"))
        if facts.get("nccl_available") and v["nccl"]:
            out.append(check("nccl", "ok", f"NCCL {v['nccl']} available"))
        else:
            out.append(check("nccl", "fail", "the NCCL backend is not available in this torch build",
                             "install an official Linux CUDA torch wheel (they bundle NCCL)"))
    return out


def gpu_link_checks(report: dict[str, Any], topo: Topology) -> list[Check]:
    out = []
    for g in report["gpus"]:
        if g["pcie_width"] and g["pcie_max_width"] and g["pcie_width"] < g["pcie_max_width"]:
            out.append(check(f"pcie_gpu{g['index']}", "warn",
                             f"GPU{g['index']} PCIe link runs ×{g['pcie_width']} of ×{g['pcie_max_width']}",
                             "reseat the card or move it to a full-width slot; check BIOS lane bifurcation"))
    for pair in topo.pairs:
        where = f"GPU{pair.a}↔GPU{pair.b}"
        text = describe_link(topo, pair)
        if pair.kind == "nvlink":
            out.append(check(f"link_{pair.a}_{pair.b}", "ok", f"{where}: {text}"))
        elif pair.p2p is False:
            out.append(check(f"link_{pair.a}_{pair.b}", "warn", f"{where}: {text}; NCCL copies through host memory",
                             "enable P2P: disable PCIe ACS / IOMMU passthrough in BIOS or VM settings; "
                             "all-reduce will be slower until then"))
        elif pair.label == "SYS":
            out.append(check(f"link_{pair.a}_{pair.b}", "warn", f"{where}: {text}",
                             "traffic crosses CPU sockets: prefer GPUs under one socket for a job "
                             "(CUDA_VISIBLE_DEVICES) when you use fewer than all"))
        else:
            out.append(check(f"link_{pair.a}_{pair.b}", "ok", f"{where}: {text}"))
    return out


def _interfaces_match(spec: str) -> bool:
    names = set(psutil.net_if_addrs())
    wanted = [p for p in spec.split(",") if p]
    if spec.startswith("^"):  # exclusion list: fine as long as something is left
        return True
    exact = spec.startswith("=")
    wanted = [w.lstrip("=") for w in wanted]
    return any((n == w) if exact else n.startswith(w) for w in wanted for n in names)


def _visible_devices_check(visible: str, gpus: int) -> Check:
    """CUDA_VISIBLE_DEVICES is only fine when it names GPUs this machine has (indices or GPU-/MIG- UUIDs)."""
    if gpus == 0:
        return check("cuda_visible_devices", "warn", f"CUDA_VISIBLE_DEVICES={visible} but this machine has no "
                     "NVIDIA GPU: it selects nothing", "unset it here; set it on the GPU machine")
    missing = [p for p in visible.split(",") if p.strip().isdigit() and int(p) >= gpus]
    if missing:
        return check("cuda_visible_devices", "fail", f"CUDA_VISIBLE_DEVICES={visible} names GPU {missing[0]}, "
                     f"but there are {gpus} GPU(s) (0…{gpus - 1}); CUDA ignores every index after a bad one",
                     f"list indices 0…{gpus - 1} only")
    return check("cuda_visible_devices", "ok", f"CUDA_VISIBLE_DEVICES={visible}")


def environment_checks(report: dict[str, Any]) -> list[Check]:
    env, out = report["environment"], []
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and not visible.strip():
        out.append(check("cuda_visible_devices", "fail", "CUDA_VISIBLE_DEVICES is empty: every GPU is hidden",
                         "unset CUDA_VISIBLE_DEVICES, or list the GPUs to use (e.g. 0,1)"))
    elif visible is not None:
        out.append(_visible_devices_check(visible, len(report.get("gpus") or [])))
    for name, what in (("NCCL_P2P_DISABLE", "GPU-to-GPU (NVLink/PCIe P2P) transfers"),
                       ("NCCL_SHM_DISABLE", "shared-memory transfers"), ("NCCL_IB_DISABLE", "InfiniBand")):
        if env.get(name, "0") not in ("0", ""):
            out.append(check(name.lower(), "warn", f"{name}={env[name]} turns off NCCL {what}",
                             f"unset {name} unless you are working around a known fault"))
    for name in ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"):
        if env.get(name) and not _interfaces_match(env[name]):
            out.append(check(name.lower(), "fail", f"{name}={env[name]} names no network interface of this host "
                             f"(have: {', '.join(sorted(psutil.net_if_addrs()))})",
                             f"set {name} to an interface listed by `ip addr`, or unset it"))
    return out


def host_checks(report: dict[str, Any]) -> list[Check]:
    host, out = report["host"], []
    shm = host["shm_total_mib"]
    if shm is None:
        out.append(check("shm", "warn", "no /dev/shm: DataLoader workers and NCCL need shared memory",
                         "mount a tmpfs on /dev/shm"))
    elif shm < 1024:
        out.append(check("shm", "warn", f"/dev/shm is only {shm} MiB: DataLoader workers and NCCL can fail "
                         "with 'Bus error' or 'No space left on device'",
                         "in Docker: --shm-size=16g or --ipc=host; on a host: mount -o remount,size=16G /dev/shm"))
    else:
        out.append(check("shm", "ok", f"/dev/shm {shm / 1024:.1f} GiB"))
    nofile = host["nofile_limit"]["soft"]
    if nofile is not None and nofile < 4096:
        out.append(check("nofile", "warn", f"open-file limit is {nofile}: many DataLoader workers and ranks "
                         "can run out ('Too many open files')", "ulimit -n 65536 (or raise nofile in limits.conf)"))
    else:
        out.append(check("nofile", "ok", f"open-file limit {nofile or 'unlimited'}"))
    memlock = host["memlock_limit"]["soft"]
    if memlock is not None and memlock < 64 << 20:
        out.append(check("memlock", "warn", f"locked-memory limit is {memlock // 1024} KiB: InfiniBand/RDMA "
                         "across nodes needs it unlimited (single-node training is unaffected)",
                         "ulimit -l unlimited (in Docker: --ulimit memlock=-1)"))
    else:
        out.append(check("memlock", "ok", "locked-memory limit " + ("unlimited" if memlock is None else f"{memlock >> 20} MiB")))
    out.append(check("cpu", "ok" if (host["cpu_usable"] or 1) >= 2 else "warn",
                     f"{host['cpu_usable']} usable CPU cores, {host['ram_total_mib'] / 1024:.1f} GiB RAM",
                     "each rank and its DataLoader workers need cores; give the job more CPUs"))
    return out


def run_checks(report: dict[str, Any], topo: Topology) -> list[Check]:
    return (software_checks(report) + gpu_link_checks(report, topo)
            + environment_checks(report) + host_checks(report))
