"""The doctor's judgements: each turns facts into {"id", "status", "message", "fix"}.

The dict is the JSON contract and stays English; each check also keeps its English templates and
values (not part of the JSON) so a view says it in the user's language with `say()`.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import psutil

from mgtutor.training.runs import nvml
from mgtutor.training.runs.launch.disk import LOW_FREE
from mgtutor.diagnostics.doctor.topology import PairLink, Topology, describe_link
from mgtutor.training.foundation.i18n import N_, _

MIN_TORCH = (2, 4)
CPU_WHEELS = "https://download.pytorch.org/whl/cpu"  # PyTorch's index of CPU-only builds


class Phrase(str):
    """A value that is itself words to translate (not a name or a number)."""

    def said(self) -> str:
        return _(self)


class Reason(Phrase):
    """Why NVML sees no GPU: a known reason, or one with the error NVML gave."""

    def said(self) -> str:
        return nvml.said(self)


class LinkWords(Phrase):
    """How two GPUs are linked (link_words()), said again in the language in force when shown."""

    topo: Topology
    pair: PairLink

    def said(self) -> str:
        return describe_link(self.topo, self.pair, _)


def link_words(topo: Topology, pair: PairLink) -> LinkWords:
    words = LinkWords(describe_link(topo, pair))
    words.topo, words.pair = topo, pair
    return words


class Check(dict[str, Any]):
    """{"id", "status", "message", "fix"} in English, plus the templates they were filled from."""

    templates: dict[str, tuple[str | None, dict[str, Any]]]


def _fill(template: str | None, values: dict[str, Any], translate: bool) -> str | None:
    if template is None:
        return None
    if not translate:
        return template.format(**values) if values else template
    said = {k: v.said() if isinstance(v, Phrase) else v for k, v in values.items()}
    return _(template).format(**said) if values else _(template)


def check(id_: str, status: str, message: str, fix: str | None = None, **values: Any) -> Check:
    """`message` and `fix` are English templates ({name} filled from `values`), marked N_() for the catalogue."""
    item = Check(id=id_, status=status, message=_fill(message, values, False), fix=_fill(fix, values, False))
    item.templates = {"message": (message, values), "fix": (fix, values)}
    return item


def say(item: Mapping[str, Any], key: str) -> str | None:
    """A check's message or fix in the current language. A report read back from disk has no
    templates: its fixed sentences are translated, a sentence with values stays as written."""
    templates = getattr(item, "templates", None)
    if templates is None:
        text = item.get(key)
        return _(text) if text else text
    template, values = templates[key]
    return _fill(template, values, True)


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
    out = [check("python", "ok", N_("Python {version}"), version=v["python"])]
    if facts.get("torch_error"):
        out.append(check("torch", "fail", N_("torch cannot be imported: {error}"),
                         N_("pip install torch (pick the CUDA build for your driver at pytorch.org)"),
                         error=facts["torch_error"]))
        return out
    torch_v = _version_tuple(v["torch"])
    out.append(check("torch", "ok" if torch_v[:2] >= MIN_TORCH else "warn", N_("torch {version}"),
                     None if torch_v[:2] >= MIN_TORCH else N_("upgrade to torch 2.4 or newer: pip install -U torch"),
                     version=v["torch"]))
    if not facts.get("distributed"):
        out.append(check("distributed", "fail", N_("this torch build has no torch.distributed"),
                         N_("install an official torch wheel (Linux builds include distributed)")))
    if not gpus:
        out.append(check("gpu", "warn", N_("no NVIDIA GPU ({error}): ranks will be CPU processes on gloo"),
                         N_("for GPU training install the NVIDIA driver on a machine with NVIDIA GPUs; "
                            "everything in mgtutor still works on the CPU"), error=Reason(report["gpu_error"])))
        if v.get("cuda"):
            out.append(cpu_build_check(v, facts, report.get("packages") or {}))
        if facts.get("gloo_available"):
            out.append(check("gloo", "ok", N_("gloo backend available (CPU collectives)")))
        return out
    out.append(check("gpu", "ok", N_("{count} NVIDIA GPU(s): {names}"), count=len(gpus),
                     names=", ".join(sorted({g["name"] for g in gpus}))))
    torch_cuda, driver_cuda = _version_tuple(v["cuda"]), _version_tuple(v["driver_cuda"])
    if not v["cuda"]:
        out.append(check("torch_cuda", "fail", N_("torch {version} is a CPU-only build"),
                         N_("install a CUDA build: pip install torch --index-url https://download.pytorch.org/whl/cu126"),
                         version=v["torch"]))
    elif driver_cuda and driver_cuda[:2] < torch_cuda[:2]:
        same_major = driver_cuda[:1] == torch_cuda[:1]
        out.append(check("driver", "warn" if same_major else "fail",
                         N_("driver {driver} supports CUDA {driver_cuda}, torch was built for CUDA {cuda}"),
                         N_("update the NVIDIA driver, or install the torch build for CUDA {driver_cuda} or older"),
                         driver=v["driver"], driver_cuda=v["driver_cuda"], cuda=v["cuda"]))
    else:
        out.append(check("driver", "ok", N_("driver {driver} (CUDA {driver_cuda}) runs torch's CUDA {cuda}"),
                         driver=v["driver"], driver_cuda=v["driver_cuda"] or "?", cuda=v["cuda"]))
    if v["cuda"]:
        if facts.get("cuda_available"):
            out.append(check("cuda", "ok", N_("torch sees {count} CUDA device(s)"), count=facts.get("device_count")))
        else:
            why = facts.get("cuda_error") or "torch.cuda.is_available() is False"
            out.append(check("cuda", "fail", N_("NVML sees GPUs but torch cannot use CUDA: {why}"),
                             N_("check CUDA_VISIBLE_DEVICES, the driver version, and that no other CUDA library "
                                "shadows torch's (LD_LIBRARY_PATH)"), why=why))
        for g in gpus:
            cap, arch = g.get("compute_capability"), facts.get("arch_list") or []
            if cap and arch and not _arch_supported(cap, arch):
                out.append(check(f"arch_gpu{g['index']}", "fail",
                                 N_("GPU{index} (sm {capability}) is not in this torch build's arch list {arch}"),
                                 N_("install a torch build compiled for this GPU (newer wheel or matching CUDA version)"),
                                 index=g["index"], capability=cap, arch=" ".join(arch)))
        if facts.get("nccl_available") and v["nccl"]:
            out.append(check("nccl", "ok", N_("NCCL {version} available"), version=v["nccl"]))
        else:
            out.append(check("nccl", "fail", N_("the NCCL backend is not available in this torch build"),
                             N_("install an official Linux CUDA torch wheel (they bundle NCCL)")))
    return out


def cpu_build_check(v: dict[str, Any], facts: dict[str, Any], packages: dict[str, str]) -> Check:
    """torch's CUDA build on a machine with no NVIDIA GPU: gigabytes of CUDA libraries for nothing; the
    CPU build runs every lesson and command here."""
    wheels = " ".join(name for name in ("torch", "torchvision", "torchaudio") if name in packages) or "torch"
    pip = f"{facts.get('executable') or 'python3'} -m pip"
    command = f"{pip} uninstall -y {wheels} && {pip} install {wheels} --index-url {CPU_WHEELS}"
    size = v.get("torch_install_bytes")
    fix = N_("the CPU build runs everything here and is a fraction of the size: {command} (the nvidia-* and "
             "triton wheels it leaves can go too: pip uninstall them, but keep nvidia-ml-py)")
    if size:
        return check("torch_build", "warn", N_("torch {version} is the CUDA {cuda} build: {gb:.1f} GB with its "
                                                 "CUDA libraries, for an NVIDIA GPU this machine does not have"),
                     fix, version=v["torch"], cuda=v["cuda"], gb=size / 1e9, command=command)
    return check("torch_build", "warn", N_("torch {version} is the CUDA {cuda} build, for an NVIDIA GPU this "
                                             "machine does not have"), fix, version=v["torch"], cuda=v["cuda"],
                 command=command)


def gpu_link_checks(report: dict[str, Any], topo: Topology) -> list[Check]:
    out = []
    for g in report["gpus"]:
        if g["pcie_width"] and g["pcie_max_width"] and g["pcie_width"] < g["pcie_max_width"]:
            out.append(check(f"pcie_gpu{g['index']}", "warn",
                             N_("GPU{index} PCIe link runs ×{width} of ×{max_width}"),
                             N_("reseat the card or move it to a full-width slot; check BIOS lane bifurcation"),
                             index=g["index"], width=g["pcie_width"], max_width=g["pcie_max_width"]))
    for pair in topo.pairs:
        where = f"GPU{pair.a}↔GPU{pair.b}"
        text = link_words(topo, pair)
        if pair.kind == "nvlink":
            out.append(check(f"link_{pair.a}_{pair.b}", "ok", "{where}: {link}", where=where, link=text))
        elif pair.p2p is False:
            out.append(check(f"link_{pair.a}_{pair.b}", "warn", N_("{where}: {link}; NCCL copies through host memory"),
                             N_("enable P2P: turn PCIe ACS off and set the IOMMU to passthrough (iommu=pt) or off, "
                                "in the BIOS or the VM's settings; all-reduce will be slower until then"),
                             where=where, link=text))
        elif pair.label == "SYS":
            out.append(check(f"link_{pair.a}_{pair.b}", "warn", "{where}: {link}",
                             N_("traffic crosses CPU sockets: prefer GPUs under one socket for a job "
                                "(CUDA_VISIBLE_DEVICES) when you use fewer than all"), where=where, link=text))
        else:
            out.append(check(f"link_{pair.a}_{pair.b}", "ok", "{where}: {link}", where=where, link=text))
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
        return check("cuda_visible_devices", "warn", N_("CUDA_VISIBLE_DEVICES={visible} but this machine has no "
                     "NVIDIA GPU: it selects nothing"), N_("unset it here; set it on the GPU machine"), visible=visible)
    missing = [p for p in visible.split(",") if p.strip().isdigit() and int(p) >= gpus]
    if missing:
        return check("cuda_visible_devices", "fail", N_("CUDA_VISIBLE_DEVICES={visible} names GPU {bad}, "
                     "but there are {gpus} GPU(s) (0…{last}); CUDA ignores every index after a bad one"),
                     N_("list indices 0…{last} only"), visible=visible, bad=missing[0], gpus=gpus, last=gpus - 1)
    return check("cuda_visible_devices", "ok", "CUDA_VISIBLE_DEVICES={visible}", visible=visible)


def environment_checks(report: dict[str, Any]) -> list[Check]:
    env, out = report["environment"], []
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and not visible.strip():
        out.append(check("cuda_visible_devices", "fail", N_("CUDA_VISIBLE_DEVICES is empty: every GPU is hidden"),
                         N_("unset CUDA_VISIBLE_DEVICES, or list the GPUs to use (e.g. 0,1)")))
    elif visible is not None:
        out.append(_visible_devices_check(visible, len(report.get("gpus") or [])))
    for name, what in (("NCCL_P2P_DISABLE", Phrase(N_("GPU-to-GPU (NVLink/PCIe P2P) transfers"))),
                       ("NCCL_SHM_DISABLE", Phrase(N_("shared-memory transfers"))), ("NCCL_IB_DISABLE", "InfiniBand")):
        if env.get(name, "0") not in ("0", ""):
            out.append(check(name.lower(), "warn", N_("{name}={value} turns off NCCL {what}"),
                             N_("unset {name} unless you are working around a known fault"),
                             name=name, value=env[name], what=what))
    for name in ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"):
        if env.get(name) and not _interfaces_match(env[name]):
            out.append(check(name.lower(), "fail", N_("{name}={value} names no network interface of this host "
                             "(have: {interfaces})"),
                             N_("set {name} to an interface listed by `ip addr`, or unset it"),
                             name=name, value=env[name], interfaces=", ".join(sorted(psutil.net_if_addrs()))))
    return out


def host_checks(report: dict[str, Any]) -> list[Check]:
    host, out = report["host"], []
    shm = host["shm_total_mib"]
    if shm is None:
        out.append(check("shm", "warn", N_("no /dev/shm: DataLoader workers and NCCL need shared memory"),
                         N_("mount a tmpfs on /dev/shm")))
    elif shm < 1024:
        out.append(check("shm", "warn", N_("/dev/shm is only {mib} MiB: DataLoader workers and NCCL can fail "
                         "with 'Bus error' or 'No space left on device'"),
                         N_("in Docker: --shm-size=16g or --ipc=host; on a host: mount -o remount,size=16G /dev/shm"),
                         mib=shm))
    else:
        out.append(check("shm", "ok", "/dev/shm {gib:.1f} GiB", gib=shm / 1024))
    nofile = host["nofile_limit"]["soft"]
    if nofile is not None and nofile < 4096:
        out.append(check("nofile", "warn", N_("open-file limit is {limit}: many DataLoader workers and ranks "
                         "can run out ('Too many open files')"), N_("ulimit -n 65536 (or raise nofile in limits.conf)"),
                         limit=nofile))
    elif nofile:
        out.append(check("nofile", "ok", N_("open-file limit {limit}"), limit=nofile))
    else:
        out.append(check("nofile", "ok", N_("open-file limit unlimited")))
    memlock = host["memlock_limit"]["soft"]
    if memlock is not None and memlock < 64 << 20:
        out.append(check("memlock", "warn", N_("locked-memory limit is {kib} KiB: InfiniBand/RDMA "
                         "across nodes needs it unlimited (single-node training is unaffected)"),
                         N_("ulimit -l unlimited (in Docker: --ulimit memlock=-1)"), kib=memlock // 1024))
    elif memlock is None:
        out.append(check("memlock", "ok", N_("locked-memory limit unlimited")))
    else:
        out.append(check("memlock", "ok", N_("locked-memory limit {mib} MiB"), mib=memlock >> 20))
    out += state_folder_checks(host.get("state_folder") or {})
    out.append(check("cpu", "ok" if (host["cpu_usable"] or 1) >= 2 else "warn",
                     N_("{cores} usable CPU cores, {ram:.1f} GiB RAM"),
                     N_("each rank and its DataLoader workers need cores; give the job more CPUs"),
                     cores=host["cpu_usable"], ram=host["ram_total_mib"] / 1024))
    return out


def state_folder_checks(state: dict[str, Any]) -> list[Check]:
    """Whether runs and reports can be kept (state_folder.py), and whether a talkative run fits."""
    if state.get("problem"):
        return [check("state_folder", "fail", N_("mgtutor cannot keep runs or reports: {problem}"),
                      N_("point XDG_STATE_HOME at a folder you can write (e.g. export XDG_STATE_HOME=/tmp/state), "
                         "or make this one writable"), problem=state["problem"])]
    free = state.get("free_mib")
    if free is None:
        return []
    if free * (1 << 20) < LOW_FREE:
        return [check("state_folder", "warn", N_("only {mib} MiB free for run records: once full, the ranks' "
                      "output is dropped"), N_("free some space there, or point XDG_STATE_HOME at a larger disk"),
                      mib=free)]
    return [check("state_folder", "ok", N_("run records: {gib:.1f} GiB free"), gib=free / 1024)]


def run_checks(report: dict[str, Any], topo: Topology) -> list[Check]:
    return (software_checks(report) + gpu_link_checks(report, topo)
            + environment_checks(report) + host_checks(report))
