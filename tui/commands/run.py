"""`mgtutor run -- SCRIPT ARGS`: any training script on N ranks, logs prefixed `[rank R]`."""
from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import TextIO

from mgtutor.diagnostics.failures.classify import Finding, diagnose_run
from mgtutor.training.runs.launcher import LaunchError, LaunchSpec, Run, launch
from mgtutor.training.runs.multinode import diagnose_node
from mgtutor.training.runs.records import exit_code_for
from mgtutor.training.runs.watch import Alert, RunWatch
from mgtutor.tui.commands.check import precheck

ALERT_EVERY_S = 1.0  # detectors read files and sockets: once a second, never once per line


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "run", help="run a training script distributed (torchrun), keep a run record",
        description="Run SCRIPT on N ranks with torchrun. Each rank writes its own log files in the run "
                    "record; this command prints them prefixed [rank R] and exits with the first failing "
                    "rank's exit code. Ctrl+C stops every rank.",
        epilog="examples:\n  mgtutor run -- train.py\n  mgtutor run --nproc 4 --backend gloo -- train.py --epochs 2\n"
               "  mgtutor run -- -m mypackage.train --lr 0.1\n"
               "  mgtutor run --nnodes 2 --node-rank 0 --rdzv-endpoint 10.0.0.1:29400 -- train.py   # on 10.0.0.1\n"
               "  mgtutor run --nnodes 2 --node-rank 1 --rdzv-endpoint 10.0.0.1:29400 -- train.py   # on the other node\n"
               "  mgtutor run --rendezvous-warn 10 --silent-warn 60 -- train.py   # warn sooner about a hang\n\n"
               "While the run goes, warnings on stderr name a rank missing at the rendezvous, a straggler, or a\n"
               "run that went silent; a failed run ends with the likely cause and its fix (mgtutor diagnose RUN_ID).",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    add_launch_options(parser)
    parser.add_argument("target", nargs=argparse.REMAINDER, metavar="-- SCRIPT [ARGS…]",
                        help="the script (or -m MODULE) and its arguments, after --")
    parser.set_defaults(func=main)


def add_launch_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--nproc", type=int, default=None, metavar="N",
                        help="ranks to start (default: one per GPU, or 2 CPU ranks without GPUs)")
    parser.add_argument("--backend", default="auto", metavar="{auto,nccl,gloo}",
                        help="NCCL on GPUs, gloo on CPUs; auto picks NCCL when a GPU is present")
    nodes = parser.add_argument_group("multi-node (torchrun c10d rendezvous; run the same command on every node)")
    nodes.add_argument("--nnodes", type=int, default=1, metavar="N", help="nodes in the job (default 1)")
    nodes.add_argument("--node-rank", type=int, default=0, metavar="R",
                       help="this node's rank; node 0 is the host of --rdzv-endpoint")
    nodes.add_argument("--rdzv-endpoint", default=None, metavar="HOST:PORT",
                       help="node 0's address and a free port, the same on every node")
    nodes.add_argument("--rdzv-id", default=None, metavar="ID", help="job id, the same on every node")
    nodes.add_argument("--rdzv-timeout", type=int, default=None, metavar="SEC",
                        help="give up when the other nodes have not joined after SEC s (torchrun: 600)")
    live = parser.add_argument_group("live warnings (printed on stderr while the run goes; 0 turns one off)")
    live.add_argument("--rendezvous-warn", type=float, default=30.0, metavar="S",
                      help="name the ranks that have not reached init_process_group after S s while the others "
                           "wait (default 30; PyTorch itself waits 10-30 minutes)")
    live.add_argument("--silent-warn", type=float, default=120.0, metavar="S",
                      help="warn that the run may be hung when no rank printed anything for S s (default 120)")


def live_options_problem(args: argparse.Namespace) -> str | None:
    for flag, value in (("--rendezvous-warn", args.rendezvous_warn), ("--silent-warn", args.silent_warn)):
        if not value >= 0:  # also rejects nan
            return f"{flag} {value:g}: give seconds >= 0 (0 turns the warning off)"
    return None


class LiveAlerts:
    """The live detectors (training.watch) on a time budget: each new alert is printed once on stderr."""

    def __init__(self, run: Run, rendezvous_after: float = 30.0, silent_after: float = 120.0,
                 err: TextIO | None = None, every: float = ALERT_EVERY_S) -> None:
        self.watch = RunWatch(run.record, rendezvous_after=rendezvous_after or float("inf"),
                              silent_after=silent_after or float("inf"))
        self.err = err
        self.every = every
        self.shown: set[tuple[str, tuple[int, ...]]] = set()
        self.printed: list[Alert] = []
        self._next = time.monotonic() + every
        self._broken = False

    @classmethod
    def from_args(cls, run: Run, args: argparse.Namespace) -> LiveAlerts:
        return cls(run, rendezvous_after=args.rendezvous_warn, silent_after=args.silent_warn)

    def tick(self, running: bool = True) -> list[Alert]:
        """Poll when the budget allows; print and return the alerts not shown before."""
        if self._broken or not running or time.monotonic() < self._next:
            return []
        self._next = time.monotonic() + self.every
        try:
            alerts = self.watch.poll(now=time.time(), running=True)
        except Exception as exc:  # a detector bug must never stop the run's output
            self._broken = True
            print(f"mgtutor: live warnings off ({type(exc).__name__}: {exc})", file=self.err or sys.stderr)
            return []
        fresh = [a for a in alerts if (a.kind, a.ranks) not in self.shown]
        for alert in fresh:
            self.shown.add((alert.kind, alert.ranks))
            self.printed.append(alert)
            print(alert_text(alert), file=self.err or sys.stderr, flush=True)
        return fresh


def alert_text(alert: Alert) -> str:
    lines = [f"mgtutor: warning ({alert.kind}): {alert.message}"]
    for rank, last in sorted(alert.last_lines.items()):
        shown = " | ".join(line.strip()[:120] for line in last[-3:]) or "(no output yet)"
        lines.append(f"  rank {rank} last lines: {shown}")
    return "\n".join(lines)


def node_options(args: argparse.Namespace) -> dict:
    """The LaunchSpec fields that add_launch_options' multi-node flags set."""
    return {"nnodes": args.nnodes, "node_rank": args.node_rank, "rdzv_endpoint": args.rdzv_endpoint,
            "rdzv_id": args.rdzv_id, "rdzv_timeout": args.rdzv_timeout}


def print_node_diagnosis(run: Run, result: dict, err=sys.stderr) -> dict | None:
    """On a multi-node run that never trained: which endpoint is unreachable, or who did not join."""
    meta = run.record.meta()
    if (meta.get("nnodes") or 1) < 2:
        return None
    try:
        log = run.record.torchrun_log.read_text(errors="replace")
    except OSError:
        log = ""
    finding = diagnose_node(meta, run.record.ranks(), result.get("status", ""), log)
    if finding:
        print(f"mgtutor: diagnosis ({finding['kind']}): {finding['evidence']}\n  fix: {finding['fix']}", file=err)
    return finding


def print_failure_diagnosis(run: Run, result: dict, err: TextIO | None = None) -> Finding | None:
    """A failed run ends with the classifier's top finding and its fix; `mgtutor diagnose` has the rest."""
    err = err or sys.stderr
    node = print_node_diagnosis(run, result, err)
    if result.get("status") not in ("failed", "lost"):
        return None
    try:
        findings = diagnose_run(run.record)
    except Exception as exc:  # the run's own exit code matters more than a classifier bug
        print(f"mgtutor: no diagnosis ({type(exc).__name__}: {exc})", file=err)
        return None
    top = next((f for f in findings if not node or f.kind != node.get("kind")), None)
    if top is None:
        return None
    print(diagnosis_block(top, run.record.run_id, more=len(findings) - 1), file=err, flush=True)
    return top


def diagnosis_block(finding: Finding, run_id: str, more: int = 0) -> str:
    who = "" if finding.rank is None else f" (rank {finding.rank})"
    lines = [f"diagnosis: {finding.kind}{who}: {finding.summary}", f"  fix: {finding.fix}"]
    for ev in finding.evidence[:2]:
        text = "".join(ch if ch.isprintable() else "?" for ch in str(ev.get("text", "")).strip())[:160]
        lines.append(f"  evidence: {ev.get('file')}:{ev.get('line')}  {text}")
    if finding.lesson:
        lines.append(f"  lesson: {finding.lesson}")
    rest = f" ({more} more finding{'s' if more != 1 else ''})" if more > 0 else ""
    lines.append(f"  details{rest}: mgtutor diagnose {run_id}")
    return "\n".join(lines)


def stream_run(run: Run, out=sys.stdout, alerts: LiveAlerts | None = None, interval: float = 0.05,
               on_tick: Callable[[], None] | None = None) -> dict:
    """Print every line prefixed with its rank until the run ends, with the live warnings once a second;
    `on_tick` runs after each batch (e.g. a progress line). Ctrl+C stops every rank."""
    try:
        while True:
            running = run.running()
            batch = run.tail.poll() if running else run.tail.drain()
            for rank, _stream, line in batch:
                prefix = "[torchrun]" if rank is None else f"[rank {rank}]"
                print(f"{prefix} {line}", file=out, flush=True)
            if on_tick is not None:
                on_tick()
            if alerts is not None:
                alerts.tick(running)
            if not running:
                return run.wait()
            if not batch:
                time.sleep(interval)
    except KeyboardInterrupt:
        print("\nmgtutor: stopping every rank…", file=sys.stderr, flush=True)
        result = run.stop()
        for rank, _stream, line in run.tail.drain():
            print(f"{'[torchrun]' if rank is None else f'[rank {rank}]'} {line}", file=out)
        stop = result.get("stop", {})
        print(f"mgtutor: stopped; {'no process left' if stop.get('clean') else 'processes left: ' + str(stop.get('survivors'))}",
              file=sys.stderr)
        return result


def describe_result(result: dict) -> str:
    first = result.get("first_failure")
    if first:
        how = f"signal {first['signal']}" if first.get("signal") else f"exit code {first['exit_code']}"
        return f"run failed: rank {first['rank']} failed first ({how})"
    return f"run {result.get('status')} in {result.get('duration_s')} s on {result.get('world_size')} " \
           f"{result.get('backend')} rank(s)"


def main(args: argparse.Namespace) -> int:
    target = args.target[1:] if args.target[:1] == ["--"] else args.target
    problem = live_options_problem(args)
    if problem:
        print(f"mgtutor run: error: {problem}", file=sys.stderr)
        return 2
    precheck(target)  # static check of the script: findings only, never blocks the launch
    try:
        run = launch(LaunchSpec(target=target, nproc=args.nproc, backend=args.backend, label=_label(target),
                                **node_options(args)))
    except LaunchError as exc:
        print(f"mgtutor run: error: {exc}", file=sys.stderr)
        return 2
    meta = run.record.meta()
    print(f"mgtutor: {meta['world_size']} rank(s), backend {meta['backend']} — {meta['device_note']}",
          file=sys.stderr, flush=True)
    if meta.get("nnodes", 1) > 1:
        print(f"mgtutor: node {meta['node_rank']} of {meta['nnodes']}, rendezvous {meta['rdzv_endpoint']} "
              f"id {meta['rdzv_id']}, this node's address {meta.get('local_addr')} on {meta.get('iface')}",
              file=sys.stderr, flush=True)
    result = stream_run(run, alerts=LiveAlerts.from_args(run, args))
    print(describe_result(result), file=sys.stderr)
    print_failure_diagnosis(run, result)
    print(f"run record: {run.record.path}", flush=True)
    return exit_code_for(result)


def _label(target: list[str]) -> str:
    if not target:
        return "run"
    return target[1] if target[0] == "-m" and len(target) > 1 else target[0].rsplit("/", 1)[-1]
