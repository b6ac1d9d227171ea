"""Failure demos: reproduce each failure for real on this machine, then diagnose the run.

    outcome = run_demo("never-joins", on_line=print)
    outcome.findings[0].kind == "rendezvous_timeout"

Every scenario starts real ranks through the launcher (torchrun); the trainer's `--inject` modes or a
tiny rank program (demo_workers) make the failure happen, never a printed imitation of it.
"""
from __future__ import annotations

import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from mgtutor.diagnostics.failures.classify import Finding
from mgtutor.diagnostics.failures.hang.watch import HangAlert, HangWatch, diagnose_with_hangs
from mgtutor.diagnostics.meters import Sampler
from mgtutor.training.runs.launch.launcher import LaunchSpec, Run, launch
from mgtutor.training.runs.records.record import RunResult
from mgtutor.training.runs.follow.samples import SampleRecorder
from mgtutor.training.runs.follow.session import RunSession
from mgtutor.training.runs.follow.detectors import Detector
from mgtutor.training.foundation.i18n import N_

TRAIN = ["-m", "mgtutor.training.worker.train", "--model", "tinycnn", "--batch-size", "16", "--dataset-size", "2048",
         "--log-every", "1", "--init-timeout", "20"]
PROBES = ("-m", "mgtutor.training.worker.probes.demos")


@dataclass(frozen=True)
class Scenario:
    name: str
    title: str
    symptom: str  # the Troubleshoot symptom it illustrates
    what_happens: str
    target: tuple[str, ...]
    expect: str  # the kind the classifier must name first
    expect_gpu: str | None = None  # a different kind when it runs on GPUs (nccl)
    hold_port: bool = False
    limit_s: float = 120.0
    cpu_ok: bool = True
    hang: bool = False  # nothing fails: the run hangs, mgtutor's hang report names the cause, the demo stops it

    def expected(self, backend: str) -> str:
        return self.expect_gpu if backend == "nccl" and self.expect_gpu else self.expect


def _trainer(steps: int, inject: str, *extra: str) -> tuple[str, ...]:
    """The trainer, `steps` steps long, with the failure its `--inject` mode puts in."""
    return (*TRAIN, "--steps", str(steps), "--inject", inject, *extra)


def _probe(scenario: str, *extra: str) -> tuple[str, ...]:
    """The tiny rank program (probes/demos.py) that plays `scenario`, its subcommand of the same name."""
    return (*PROBES, scenario, *extra)


SCENARIOS: dict[str, Scenario] = {s.name: s for s in [
    Scenario("never-joins", N_("A rank that never joins"), N_("hangs at start"),
             N_("Rank 1 never calls init_process_group; rank 0 waits for it at the rendezvous until its timeout."),
             _trainer(4, "hang-before-init", "--inject-rank", "1", "--init-timeout", "8"), "rendezvous_timeout"),
    Scenario("port-in-use", N_("Port already in use"), N_("address already in use"),
             N_("mgtutor holds a port open, and the ranks are told to host their store on that same port."),
             _probe("port-in-use"), "port_in_use", hold_port=True),
    Scenario("oom", N_("Out of memory on one rank"), N_("out of memory"),
             N_("Rank 1 allocates until the allocator fails (CUDA OOM on a GPU, MemoryError on a CPU)."),
             _trainer(6, "oom", "--inject-rank", "1", "--inject-step", "2"), "host_oom_killed", expect_gpu="cuda_oom"),
    Scenario("crash", N_("A crashing rank"), N_("ranks disagree"),
             N_("Rank 1 raises an exception at step 3; torchrun stops the others."),
             _trainer(6, "crash-rank", "--inject-rank", "1"), "child_failed"),
    Scenario("unused-param", N_("Unused parameters"), N_("ranks disagree"),
             N_("The model has a layer forward never uses; DDP waits for its gradient and fails at the next step."),
             _trainer(4, "unused-param"), "ddp_unused_parameters"),
    Scenario("no-sampler", N_("No DistributedSampler"), N_("no speed-up"),
             N_("Every rank shuffles the whole data set the same way: identical batches, identical losses."),
             _trainer(4, "no-sampler"), "no_distributed_sampler"),
    Scenario("nan-loss", N_("NaN loss"), N_("ranks disagree"),
             N_("Rank 1 gets a corrupt (NaN) sample; the all-reduce spreads NaN to every rank."),
             _trainer(6, "nan-loss", "--inject-rank", "1"), "nan_loss"),
    Scenario("straggler", N_("A straggler"), N_("no speed-up"),
             N_("Rank 1 sleeps before every step; the others wait for it in the gradient all-reduce."),
             _trainer(8, "slow-rank", "--inject-rank", "1", "--slow-seconds", "0.3"), "straggler"),
    Scenario("skip-allreduce", N_("A rank skips a collective"), N_("hangs at start"),
             N_("Rank 1 skips an all-reduce; rank 0 waits in it until the collective timeout (5 s here)."),
             _probe("skip-allreduce", "--timeout", "5"), "collective_timeout"),
    Scenario("world-size", N_("The script sets the world size"), N_("hangs at start"),
             N_("The script asks for one rank more than torchrun started; every rank waits for a peer that never comes, "
                "in init_process_group on gloo, in its first all_reduce on NCCL (PyTorch's own timeout: 30 minutes on "
                "gloo, 10 on NCCL). mgtutor reads their stacks instead."),
             _probe("world-size", "--timeout", "1800"), "world_size_mismatch", hang=True),
    Scenario("stuck-loader", N_("A data loader that never returns"), N_("hangs after a while"),
             N_("Rank 1's Dataset.__getitem__ never returns (a dead network disk); rank 0 waits for it in all_reduce. "
                "The stacks show rank 1 in its data loading, and the worker's line."),
             _probe("stuck-loader", "--timeout", "1800"), "rank_outside_collective", hang=True),
]}


@dataclass
class DemoOutcome:
    scenario: Scenario
    run: Run
    result: RunResult
    findings: list[Finding] = field(default_factory=list)

    @property
    def backend(self) -> str:
        return self.run.record.meta().backend or "gloo"

    @property
    def diagnosed(self) -> bool:
        """True when the classifier names the expected cause first."""
        return bool(self.findings) and self.findings[0].kind == self.scenario.expected(self.backend)


def _hold_port() -> tuple[socket.socket, int]:
    holder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    holder.bind(("127.0.0.1", 0))
    holder.listen(1)
    return holder, holder.getsockname()[1]


def run_demo(name: str, nproc: int = 2, backend: str = "auto", on_line: Callable[[int | None, str, str], None] | None = None,
             root: Path | None = None, on_start: Callable[[Run], None] | None = None) -> DemoOutcome:
    """Launch the scenario, stream its lines to `on_line`, wait (stop at its time limit), diagnose."""
    scenario = SCENARIOS[name]
    env: dict[str, str] = {}
    holder = None
    if scenario.hold_port:
        holder, port = _hold_port()
        env["MGTUTOR_DEMO_PORT"] = str(port)
    try:
        run = launch(LaunchSpec(target=list(scenario.target), nproc=nproc, backend=backend,
                                label=f"demo-{name}", env=env), root)
        if on_start:
            on_start(run)
        detectors: list[Detector] = [SampleRecorder(run.record, Sampler().row)]  # the meters, for `mgtutor report`
        detectors += [HangWatch(run.record)] if scenario.hang else []
        session = RunSession(run.record, run, detectors=detectors, timeout_s=scenario.limit_s,
                             diagnose=diagnose_with_hangs)
        final = None
        try:
            for update in session.updates():
                if on_line:
                    for rank, stream, line in update.lines:
                        on_line(rank, stream, line)
                if update.final:
                    final = update
                if any(isinstance(alert, HangAlert) for alert in update.new_alerts):
                    break  # the report is saved in the run: stop the hung ranks
        finally:
            final = final or session.stop()
    finally:
        if holder is not None:
            holder.close()
    assert final.result is not None
    findings = list(final.findings) if final.findings or not scenario.hang else diagnose_with_hangs(run.record)
    return DemoOutcome(scenario, run, final.result, findings)
