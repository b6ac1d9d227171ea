"""Troubleshoot by symptom: for each symptom the checks that tell its causes apart, and the demos that show them.

Checks are quick facts about this machine (no torch): does MASTER_ADDR resolve, is the port free or
reachable and who holds it, which interfaces exist, how much GPU/host/shared memory there is.
Symptoms whose cause is often in the user's own script name the `mgtutor check` symptom
(`script_symptom`, a key of diagnostics.check.findings_for_symptom) whose findings explain them.
"""
from __future__ import annotations

import os
import shutil
import socket
from collections.abc import Callable
from dataclasses import dataclass

import psutil

from mgtutor.training.foundation.i18n import N_, _
from mgtutor.training.runs import nvml
from mgtutor.training.runs.nvml import inventory

DEFAULT_PORT = 29500


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool | None  # None: information, neither good nor bad
    text: str


@dataclass(frozen=True)
class Symptom:
    key: str
    title: str
    causes: str
    checks: tuple[Callable[[], Check], ...]
    demos: tuple[str, ...]
    script_symptom: str | None = None  # one-gpu-busy | same-data | no-speedup | hang


def _addr() -> str:
    return os.environ.get("MASTER_ADDR", "127.0.0.1")


def _port() -> int:
    try:
        return int(os.environ.get("MASTER_PORT", DEFAULT_PORT))
    except ValueError:
        return DEFAULT_PORT


def check_addr_resolves() -> Check:
    addr = _addr()
    try:
        infos = {str(i[4][0]) for i in socket.getaddrinfo(addr, None, proto=socket.IPPROTO_TCP)}
    except (OSError, UnicodeError) as exc:
        return Check(_("MASTER_ADDR resolves"), False,
                     _("{addr} does not resolve ({why}); use node 0's IP address").format(addr=repr(addr), why=exc))
    return Check(_("MASTER_ADDR resolves"), True, f"{addr} → {', '.join(sorted(infos))}")


def check_port() -> Check:
    """Free (we could host the store), or in use and by whom (a leftover job?)."""
    port = _port()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("0.0.0.0", port))
            return Check(_("port {port} free").format(port=port), True,
                         _("port {port} is free on this machine").format(port=port))
        except OSError:
            pass
    holder = _port_holder(port)
    used = (_("port {port} is in use by {holder}") if holder else _("port {port} is in use")).format(port=port,
                                                                                                     holder=holder)
    return Check(_("port {port} free").format(port=port), False,
                 used + _("; end it or pass another --master-port"))


def _port_holder(port: int) -> str | None:
    try:
        for conn in psutil.net_connections(kind="tcp"):
            if conn.laddr and conn.laddr.port == port and conn.status == psutil.CONN_LISTEN and conn.pid:
                proc = psutil.Process(conn.pid)
                return f"pid {conn.pid} ({' '.join(proc.cmdline()[:3])[:80]})"
    except (psutil.Error, OSError):
        return None
    return None


def check_port_reachable() -> Check:
    addr, port = _addr(), _port()
    try:
        with socket.create_connection((addr, port), timeout=2):
            return Check(_("store reachable"), True, _("{addr}:{port} accepts connections").format(addr=addr, port=port))
    except OSError as exc:
        return Check(_("store reachable"), None, _("{addr}:{port} does not answer ({why}): fine before a job starts; "
                     "during a hang it means the store host is down, wrong, or firewalled").format(
                         addr=addr, port=port, why=exc.strerror or exc))


def check_interfaces() -> Check:
    names = sorted(psutil.net_if_addrs())
    wanted = [(var, os.environ[var]) for var in ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME") if os.environ.get(var)]
    bad = [f"{var}={value}" for var, value in wanted
           if not any(n.startswith(v.lstrip("^=")) for v in value.split(",") for n in names)]
    if bad:
        return Check(_("network interfaces"), False, _("{names} names no interface here (have: {have})").format(
            names=", ".join(bad), have=", ".join(names)))
    return Check(_("network interfaces"), None, _("interfaces: {names}").format(names=", ".join(names)) +
                 (_("; set {variables}").format(variables=", ".join(f"{k}={v}" for k, v in wanted)) if wanted else ""))


def check_gpus() -> Check:
    inv = inventory()
    if not inv.gpus:
        return Check(_("GPUs"), None, _("no NVIDIA GPU usable ({why}): ranks run on the CPU with gloo").format(
            why=nvml.said(inv.error)))
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    return Check(_("GPUs"), True, inv.summary + (f"; CUDA_VISIBLE_DEVICES={visible}" if visible is not None else ""))


def check_gpu_memory() -> Check:
    inv = inventory()
    if not inv.gpus:
        return Check(_("GPU memory"), None, _("no GPU: an OOM here is host memory (MemoryError or the OOM killer)"))
    return Check(_("GPU memory"), None, ", ".join(f"GPU {g.index}: {g.memory_total_mib:,.0f} MiB" for g in inv.gpus))


def check_host_memory() -> Check:
    mem = psutil.virtual_memory()
    low = mem.available < 2 << 30
    return Check(_("host memory"), not low, _("{free:.1f} GiB free of {total:.1f} GiB").format(
        free=mem.available / 2**30, total=mem.total / 2**30))


def check_shm() -> Check:
    try:
        usage = shutil.disk_usage("/dev/shm")
    except OSError:
        return Check("/dev/shm", None, _("no /dev/shm here"))
    small = usage.total < 1 << 30
    return Check("/dev/shm", not small, _("{free:,.0f} MiB free of {total:,.0f} MiB").format(
        free=usage.free / 2**20, total=usage.total / 2**20) +
                 (_("; too small for DataLoader workers and NCCL: --shm-size=16g or --ipc=host") if small else ""))


def check_debug_env() -> Check:
    value = os.environ.get("TORCH_DISTRIBUTED_DEBUG")
    return Check("TORCH_DISTRIBUTED_DEBUG", None, _("set to {value}").format(value=value) if value else
                 _("unset: set TORCH_DISTRIBUTED_DEBUG=DETAIL to name the first collective that differs"))


def check_nccl_env() -> Check:
    found = {k: v for k, v in os.environ.items() if k.startswith("NCCL_")}
    return Check(_("NCCL environment"), None, ", ".join(f"{k}={v}" for k, v in sorted(found.items())) or
                 _("no NCCL_* variable set; NCCL_DEBUG=INFO prints what NCCL chooses and why it fails"))


SYMPTOMS: tuple[Symptom, ...] = (
    Symptom("hang", N_("Hangs at start"), N_("a rank never started or never reached init_process_group; MASTER_ADDR or "
            "the port unreachable; a collective one rank never entered"),
            (check_addr_resolves, check_port, check_port_reachable, check_interfaces),
            ("never-joins", "world-size", "skip-allreduce"),
            "hang"),
    Symptom("hang-later", N_("Hangs after a while"), N_("a collective only some ranks reach (a barrier or all_reduce under "
            "if rank == 0, an uneven last batch), a rank that died or was OOM-killed, a stuck DataLoader worker"),
            (check_debug_env, check_nccl_env, check_host_memory, check_shm), ("skip-allreduce", "stuck-loader"), "hang"),
    Symptom("oom", N_("Out of memory"), N_("batch too large for the GPU, several ranks on one GPU, host RAM or /dev/shm exhausted"),
            (check_gpu_memory, check_host_memory, check_shm), ("oom",)),
    Symptom("one-gpu", N_("Only one GPU busy"), N_("DataParallel's GPU-0 bottleneck, too few ranks, every rank on cuda:0"),
            (check_gpus,), ("no-sampler",), "one-gpu-busy"),
    Symptom("same-data", N_("Ranks see the same data"), N_("no DistributedSampler (every rank iterates the whole data set), "
            "shuffle=True beside the sampler, set_epoch never called (every epoch repeats the same order)"),
            (), ("no-sampler",), "same-data"),
    Symptom("no-speedup", N_("No speed-up"), N_("no DistributedSampler (every rank does all the work), a straggler, data loading"),
            (check_gpus, check_host_memory), ("no-sampler", "straggler"), "no-speedup"),
    Symptom("nccl", N_("NCCL error"), N_("wrong network interface, /dev/shm too small, P2P not supported, a peer died"),
            (check_nccl_env, check_interfaces, check_shm), ("crash",)),
    Symptom("port", N_("Address already in use"), N_("another job or a leftover process holds MASTER_PORT"),
            (check_port,), ("port-in-use",)),
    Symptom("disagree", N_("Ranks disagree"), N_("unused parameters, different collectives per rank, NaN loss, a crash on one rank"),
            (check_debug_env,), ("unused-param", "nan-loss", "crash")),
)


def run_checks(symptom: Symptom) -> list[Check]:
    out = []
    for check in symptom.checks:
        try:
            out.append(check())
        except Exception as exc:  # a check that cannot run says so and never stops the others
            out.append(Check(getattr(check, "__name__", "check"), None, _("could not check: {why}").format(why=exc)))
    return out
