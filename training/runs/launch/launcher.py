"""Start a distributed job with torchrun, follow its logs, stop it completely.

    run = launch(LaunchSpec(target=["-m", "mgtutor.training.worker.train", "--steps", "20"], nproc=2))
    for update in RunSession(run.record, run).updates(): ...   # training/runs/follow/session.py
    result = run.wait()           # or run.stop()

Process tree: supervisor (own session) → torchrun → one rank wrapper per rank (torchrun gives
each its own session) → the rank itself. Headless; never imports torch.
"""
from __future__ import annotations

import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from mgtutor.training.foundation.i18n import N_, _, retold
from mgtutor.training.foundation.said import Said, in_english, keep, say_kept
from mgtutor.training.runs.nvml import GPU_SUMMARY, NO_GPU_SUMMARY, inventory, reason_said, said
from mgtutor.training.runs.events.writer import EVENTS_ENV
from mgtutor.training.runs.forensics.flight import flight_env
from mgtutor.training.runs.net.ports import free_port
from mgtutor.training.runs.net.multinode import (
    NodeError,
    NodePlan,
    node_env,
    node_meta,
    plan_node,
    rendezvous_args,
    unresolved_name_note,
)
from mgtutor.training.runs.launch.disk import (
    os_error_words,
    reserve,
    space_problem,
    update_meta_anyway,
    write_json_anyway,
)
from mgtutor.training.runs.launch.procs import describe, run_processes, signal_all
from mgtutor.training.foundation.safe_io import open_private, path_kind
from mgtutor.training.foundation.secrets import redact_env, secret_digests, secret_values
from mgtutor.training.runs.forensics.stacks import hook_env
from mgtutor.training.runs.records.record import (
    RUN_DIR_ENV,
    RUN_ID_ENV,
    RunMeta,
    RunRecord,
    RunResult,
    RunStatus,
    StopReport,
    build_result,
    runs_root,
)

BACKENDS = ("auto", "nccl", "gloo")
# An argv, shell-quoted, that stands in for `python -m torch.distributed.run` and takes its arguments:
# the tests' torch-free stand-in (tests/standin/torchrun.py) for the run layer's own plumbing.
LAUNCHER_ENV = "MGTUTOR_LAUNCHER"
BACKEND_ENV = "MGTUTOR_BACKEND"
CPU_RANKS_PER_CORE = 4  # gloo ranks a core may take turns on; more is refused (cpu_ranks_problem)
# bytes set aside (disk.reserve) for each rank's file, and for result.json (and 512 a rank), so that how
# the run ended is written even once the ranks' output has filled the disk
RANK_RESERVE = 4096
RESULT_RESERVE = 8192
_RECORDED_ENV_PREFIXES = ("NCCL_", "TORCH_", "MASTER_", "GLOO_", "CUDA_", "OMP_", "MGTUTOR_")


class LaunchError(Exception):
    """Bad input to a launch, with one line that says what to do instead."""


@dataclass
class LaunchSpec:
    target: list[str]  # ["-m", "some.module", args…] or ["script.py", args…]
    nproc: int | None = None
    backend: str = "auto"
    label: str = "run"
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    # multi-node (training/runs/net/multinode.py): the same flags as torchrun's c10d rendezvous
    nnodes: int = 1
    node_rank: int = 0
    rdzv_endpoint: str | None = None  # HOST:PORT of node 0; required when nnodes > 1
    rdzv_id: str | None = None  # the same on every node of one job
    rdzv_timeout: int | None = None  # seconds to wait for the other nodes (torchrun: 600)
    # a user's script measured by the ranks' hook (`step` events; training/worker/rank_hook.py)
    instrument: bool = False


@dataclass(frozen=True)
class Plan:
    backend: str
    nproc: int
    gpus: list[dict[str, Any]]
    gpu_note: Said  # the inventory's summary
    gpu_error: str | None = None


def arguments_problem(backend: str, nproc: int | None) -> str | None:
    """What is wrong with --backend or --nproc, before anything is looked at or started."""
    if backend not in BACKENDS:
        return _("unknown backend {backend}: use auto, nccl or gloo").format(backend=repr(backend))
    if nproc is not None and nproc < 1:
        return _("--nproc must be at least 1 (got {nproc})").format(nproc=nproc)
    return None


def plan(spec: LaunchSpec) -> Plan:
    """Decide backend and rank count, or raise LaunchError with the fix."""
    problem = arguments_problem(spec.backend, spec.nproc)
    if problem:
        raise LaunchError(problem)
    inv = inventory()
    gpus = [{"index": g.index, "name": g.name, "memory_total_mib": g.memory_total_mib} for g in inv.gpus]
    backend = spec.backend if spec.backend != "auto" else ("nccl" if gpus else "gloo")
    if backend == "nccl":
        if not gpus:
            raise LaunchError(_("backend nccl needs NVIDIA GPUs, and none is usable here ({why}); "
                                "use --backend gloo to run the ranks on the CPU").format(why=said(inv.error)))
        nproc = spec.nproc or len(gpus)
        if nproc > len(gpus):
            raise LaunchError(_("--nproc {nproc} asks for more ranks than the {gpus} GPU(s) here; "
                                "use --nproc {gpus}, or --backend gloo to run {nproc} CPU ranks").format(
                nproc=nproc, gpus=len(gpus)))
    else:
        nproc = spec.nproc or 2
        problem = cpu_ranks_problem(nproc)
        if problem:
            raise LaunchError(problem)
    return Plan(backend=backend, nproc=nproc, gpus=gpus, gpu_note=inv.summary_said, gpu_error=inv.error)


def usable_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def cpu_ranks_problem(nproc: int) -> str | None:
    """Why `nproc` CPU ranks cannot run here, or None. Each is a Python process that imports torch;
    past a few a core they only take turns, and thousands exhaust the machine before the first step."""
    cores = usable_cores()
    limit = max(CPU_RANKS_PER_CORE, CPU_RANKS_PER_CORE * cores)
    if nproc <= limit:
        return None
    return _("--nproc {nproc} asks for more CPU ranks than this machine can run: {cores} usable core(s) take at "
             "most {limit} ({per} a core; each rank is a Python process with torch, about 0.3 GiB of memory); "
             "use --nproc {limit} or fewer").format(nproc=nproc, cores=cores, limit=limit, per=CPU_RANKS_PER_CORE)


def check_target(target: list[str]) -> list[str]:
    """The target with a script path made absolute, or LaunchError if there is nothing to run."""
    if not target:
        raise LaunchError(_("nothing to run: give a script (mgtutor run -- train.py) or a module (-m pkg.mod)"))
    if target[0] == "-m":
        if len(target) < 2:
            raise LaunchError(_("-m needs a module name"))
        return list(target)
    script = Path(target[0]).expanduser()
    kind = path_kind(script)
    if kind == "missing":
        raise LaunchError(_("no such script: {path}").format(path=target[0]))
    if kind == "a directory":
        raise LaunchError(_("{path} is a directory, not a script: give the file to run "
                            "(mgtutor run -- {folder}/train.py), or -m PACKAGE.MODULE").format(
            path=target[0], folder=target[0].rstrip("/")))
    if kind is not None:
        raise LaunchError(_("{path} is {kind}, not a script: give a Python file").format(path=target[0], kind=kind))
    return [str(script.resolve()), *target[1:]]


def torchrun_literal(text: str) -> str:
    """torchrun passes the script and its arguments through string.Template (to fill in
    ${local_rank}), which reads $$ as one $: every $ is doubled so the script gets it as given.
    A `${local_rank}` written on purpose therefore stays as written: the rank reads LOCAL_RANK
    from its environment instead."""
    return text.replace("$", "$$")


def launcher_argv() -> list[str]:
    """torchrun as this Python runs it, or what MGTUTOR_LAUNCHER names in its place."""
    custom = os.environ.get(LAUNCHER_ENV, "").strip()
    return shlex.split(custom) if custom else [sys.executable, "-m", "torch.distributed.run"]


def torchrun_argv(target: list[str], nproc: int, port: int, run_id: str,
                  rendezvous: list[str] | None = None) -> list[str]:
    """The supervisor's command: torchrun, which starts the rank wrapper with `target` (given
    exactly: see torchrun_literal) once per rank."""
    # --local-addr: where the ranks meet is the loopback address, not this machine's name (which may
    # not resolve); `--` before the script: torchrun parses none of its arguments (a script's `--log`
    # is no prefix of torchrun's --log-dir)
    rendezvous = rendezvous or ["--nnodes", "1", "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}",
                                "--rdzv-id", run_id, "--local-addr", "127.0.0.1"]
    return [
        *launcher_argv(), "--nproc-per-node", str(nproc), *rendezvous,
        "--max-restarts", "0",
        "-m", "mgtutor.training.runs.launch.rank", "--", *(torchrun_literal(arg) for arg in target),
    ]


def rank_env(base: dict[str, str], record: RunRecord, backend: str, nproc: int,
             node: NodePlan | None = None) -> dict[str, str]:
    env = dict(base)
    env.update({
        RUN_DIR_ENV: str(record.path), RUN_ID_ENV: record.run_id, EVENTS_ENV: str(record.events_path),
        BACKEND_ENV: backend, "PYTHONUNBUFFERED": "1",
    })
    # torchrun forces 1 thread per rank when unset; CPU ranks train faster sharing the cores.
    env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // nproc)))
    if node is not None:
        return node_env(env, node)  # the interface that reaches node 0, not loopback
    env.setdefault("GLOO_SOCKET_IFNAME", "lo")  # single node: gloo talks over loopback
    return env


def recorded_env(env: dict[str, str]) -> dict[str, str]:
    """The variables meta.json keeps (those that shape a distributed run), a secret's value never."""
    return redact_env({k: v for k, v in sorted(env.items()) if k.startswith(_RECORDED_ENV_PREFIXES)})


CPU_CHOSEN = N_("{nproc} CPU ranks on gloo (GPUs present, gloo chosen)")
CPU_NO_GPU = N_("{nproc} CPU ranks on gloo — no NVIDIA GPU ({why})")


def device_note(the_plan: Plan) -> Said:
    """One line for screens and logs saying where the ranks run: meta.json keeps it in English
    (`device_note`) and as a message id with its arguments (`device_said`), said in the reader's language."""
    if the_plan.backend == "nccl":
        return the_plan.gpu_note
    if the_plan.gpus:
        return Said(CPU_CHOSEN, nproc=the_plan.nproc)
    return Said(CPU_NO_GPU, nproc=the_plan.nproc, why=reason_said(the_plan.gpu_error))


def said_device_note(meta: RunMeta) -> str:
    """A run's device note in the language in force: from its message id, or (a record written before
    the id was kept) read back from its English."""
    if meta.device_said:
        return say_kept(meta.device_said) or meta.device_note
    return retold(meta.device_note, (CPU_NO_GPU, CPU_CHOSEN, NO_GPU_SUMMARY, GPU_SUMMARY), why=said)


def launch(spec: LaunchSpec, root: Path | None = None) -> Run:
    """Validate, create the run record, and start the supervisor in its own session."""
    the_plan = plan(spec)
    target = check_target(spec.target)
    try:
        node = plan_node(spec.nnodes, spec.node_rank, spec.rdzv_endpoint, spec.rdzv_id, spec.rdzv_timeout)
    except NodeError as exc:
        raise LaunchError(str(exc)) from None
    too_little, low = space_problem(root or runs_root())
    if too_little:
        raise LaunchError(too_little)
    try:
        record = RunRecord.create(spec.label, root)
    except OSError as exc:  # runs/ is a file, a symlink, or not writable
        raise LaunchError(_("cannot keep the run record: {why}").format(why=os_error_words(exc))) from None
    try:
        return _start(spec, record, the_plan, target, node, low)
    except OSError as exc:  # the disk filled, or the folder went away: no half-made record is left
        shutil.rmtree(record.path, ignore_errors=True)
        raise LaunchError(_("cannot keep the run record: {why}").format(why=os_error_words(exc))) from None


def _start(spec: LaunchSpec, record: RunRecord, the_plan: Plan, target: list[str], node: NodePlan | None,
           low_space: str | None) -> Run:
    """Write the record's meta.json and start the supervisor; OSError when the record cannot be written."""
    argv = torchrun_argv(target, the_plan.nproc, free_port(), record.run_id,
                         rendezvous_args(node) if node else None)
    env = rank_env({**os.environ, **spec.env}, record, the_plan.backend, the_plan.nproc, node)
    # mgtutor's own workers write their own step events: the hook measures only a user's script
    own_worker = len(target) > 1 and target[0] == "-m" and target[1].startswith("mgtutor.")
    env.update(hook_env(record, env, spec.instrument and not own_worker))  # stacks without ptrace rights; steps
    env.update(flight_env(record, env, the_plan.backend))  # NCCL's Flight Recorder (and gloo's) into <run>/fr/
    placed = node_meta(node, the_plan.nproc)
    ranks_note = device_note(the_plan)
    record.write_meta(RunMeta.from_json({
        "run_id": record.run_id, "label": spec.label, "target": target, "torchrun_argv": argv,
        "world_size": the_plan.nproc, "nproc_per_node": the_plan.nproc, "nnodes": 1, "node_rank": 0,
        "backend": the_plan.backend, "devices": the_plan.gpus if the_plan.backend == "nccl" else [],
        "device_note": in_english(ranks_note), "device_said": keep(ranks_note), **placed,
        "env": recorded_env(env), "secret_digests": secret_digests(secret_values(env, target)),
        "host": socket.gethostname(), "cwd": spec.cwd or os.getcwd(),
        "started": time.time(), "ended": None, "status": RunStatus.RUNNING,
    }))
    reserve(record.path / "result.json", min(RESULT_RESERVE + 512 * the_plan.nproc, 4 << 20))
    for rank in placed["global_ranks"]:  # each rank's exit, written by its wrapper even once the disk is full
        reserve(record.path / "ranks" / f"rank{rank}.json", RANK_RESERVE)
    notes = [low_space, unresolved_name_note((node.local_addr or "?") if node else "127.0.0.1")]
    with os.fdopen(open_private(record.torchrun_log, append=True), "ab") as log:
        for note in filter(None, notes):  # the first lines the follower shows, and kept with the run
            log.write(("mgtutor: " + _("warning: {message}").format(message=note) + "\n").encode())
        log.flush()
        supervisor = subprocess.Popen(
            [sys.executable, "-m", "mgtutor.training.runs.launch.supervise", str(record.path)],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            env=env, cwd=spec.cwd, start_new_session=True,
        )
    update_meta_anyway(record, supervisor_pid=supervisor.pid, pgid=supervisor.pid)
    return Run(record, supervisor)


class Run:
    """A launched run. Owns the supervisor process; the App (not a screen) should hold it."""

    def __init__(self, record: RunRecord, supervisor: subprocess.Popen[bytes] | None = None) -> None:
        self.record = record
        self.supervisor = supervisor

    @property
    def pid(self) -> int | None:
        return self.supervisor.pid if self.supervisor else self.record.supervisor_pid()

    def running(self) -> bool:
        """True until the run's result is final: while the supervisor lives, and while a stop (from
        any thread or process) is still to add its report to the supervisor's result."""
        if self.supervisor is not None:
            return not self._supervisor_ended() or self.record.stop_under_way()
        return self.record.status() == RunStatus.RUNNING

    def _supervisor_ended(self) -> bool:
        """Whether the supervisor has exited (reaped here). Not Popen.poll() or wait(): they take a lock, and
        a KeyboardInterrupt landing between its acquire and the `try` that frees it (Ctrl+C on `mgtutor
        demo`, say) leaves it taken, so that every later wait blocks on it for ever."""
        supervisor = self.supervisor
        assert supervisor is not None
        if supervisor.returncode is None:
            try:
                pid, status = os.waitpid(supervisor.pid, os.WNOHANG)
            except ChildProcessError:  # reaped already: by a stop's psutil.wait_procs, or another thread
                pid, status = supervisor.pid, 0
            if pid == supervisor.pid and supervisor.returncode is None:
                supervisor.returncode = os.waitstatus_to_exitcode(status)
        return supervisor.returncode is not None

    def wait(self, timeout: float | None = None) -> RunResult:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.running():
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"run {self.record.run_id} still running")
            time.sleep(0.05)
        return self.record.result()

    def stop(self, grace: float = 10.0) -> RunResult:
        """SIGTERM every process of the run, wait `grace` s, SIGKILL the rest, verify none is left."""
        was_running = self.running()
        with self.record.stopping():
            return self._stop(grace, was_running)

    def _stop(self, grace: float, was_running: bool) -> RunResult:
        run_id = self.record.run_id
        procs = run_processes(run_id, self.pid, self.record)
        report = StopReport(requested=time.time(), processes=len(procs))
        signal_all(procs, signal.SIGTERM)
        _, alive = psutil.wait_procs(procs, timeout=grace)
        alive = [p for p in alive if p.is_running()]
        if alive:
            report.killed = describe(alive)
            signal_all(alive, signal.SIGKILL)
            psutil.wait_procs(alive, timeout=5)
        reap_by = time.monotonic() + 5
        while self.supervisor is not None and not self._supervisor_ended() and time.monotonic() < reap_by:
            time.sleep(0.05)
        survivors = run_processes(run_id, None, self.record)
        report.survivors = describe(survivors)
        report.clean = not survivors
        result = self.record.saved_result() or build_result(self.record, stopped=True)
        if was_running and result.first_failure is None:
            result.status = RunStatus.STOPPED
        result.stop = report
        write_json_anyway(self.record.path / "result.json", result.to_json())
        try:
            self.record.update_meta(ended=self.record.meta().ended or time.time(), status=result.status)
        except OSError:  # a full disk: the result above is what counts
            pass
        return result
