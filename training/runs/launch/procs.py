"""Finding and ending every process of a run, wherever torchrun put it.

torchrun starts each worker in a session of its own, so one process group does not hold a run.
Every process we start carries `MGTUTOR_RUN_ID` in its environment; a scan for it finds them all,
also orphans whose parent died.
"""
from __future__ import annotations

import os
import signal

import psutil

from mgtutor.training.runs.records.record import RUN_ID_ENV, RunRecord, carries_run


def run_processes(run_id: str, root_pid: int | None = None, record: RunRecord | None = None) -> list[psutil.Process]:
    """Live processes of a run: descendants of `root_pid` and any process marked with the run id; with
    `record`, only those started for that very folder (carries_run): a copy of a run's folder has the
    same id, and stopping the copy must not stop the original."""
    found: dict[int, psutil.Process] = {}
    if root_pid:
        try:
            root = psutil.Process(root_pid)
            found[root.pid] = root
            found.update({p.pid: p for p in root.children(recursive=True)})
        except psutil.Error:
            pass
    me = os.getpid()
    for proc in psutil.process_iter():
        if proc.pid in found or proc.pid == me:
            continue
        try:
            if proc.environ().get(RUN_ID_ENV) == run_id and (record is None or carries_run(proc, record)):
                found[proc.pid] = proc
        except psutil.Error:
            continue
    return [p for p in found.values() if _running(p)]


def _running(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def signal_all(procs: list[psutil.Process], sig: signal.Signals) -> None:
    """Signal each process group once, then each process (a group may hold only some of them)."""
    groups: set[int] = set()
    for proc in procs:
        try:
            groups.add(os.getpgid(proc.pid))
        except OSError:
            continue
    for pgid in groups:
        if pgid != os.getpgrp():
            try:
                os.killpg(pgid, sig)
            except OSError:
                pass
    for proc in procs:
        try:
            proc.send_signal(sig)
        except psutil.Error:
            pass


def describe(procs: list[psutil.Process]) -> list[dict[str, object]]:
    out = []
    for proc in procs:
        try:
            out.append({"pid": proc.pid, "cmdline": " ".join(proc.cmdline())[:200]})
        except psutil.Error:
            out.append({"pid": proc.pid, "cmdline": "?"})
    return out
