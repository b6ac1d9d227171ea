"""`mgtutor run -- SCRIPT ARGS`: any training script on N ranks, logs prefixed `[rank R]`."""
from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from collections.abc import Callable, Sequence
from typing import TextIO

from mgtutor.training.foundation.i18n import _
from mgtutor.diagnostics.failures.classify import Finding
from mgtutor.diagnostics.failures.kind_titles import kind_title
from mgtutor.diagnostics.failures.oom.explain import memory_lines
from mgtutor.diagnostics.failures.hang.watch import HangAlert
from mgtutor.diagnostics.feed import open_feed
from mgtutor.tui.commands.check import patch_lines
from mgtutor.training.runs.launch.control import Interrupted, deferred, follow_signals
from mgtutor.training.runs.launch.disk import DROPPED_KEY, dropped_note
from mgtutor.training.runs.launch.launcher import LaunchError, LaunchSpec, Run, check_target, launch, plan, said_device_note
from mgtutor.training.runs.net.multinode import NodeDiagnosis, diagnose_node
from mgtutor.training.runs.launch.rank import MEMORY_ENV
from mgtutor.training.runs.forensics.stacks import INSTRUMENT_ENV
from mgtutor.training.runs.records.record import RunRecord, RunResult, RunStatus, exit_code_for
from mgtutor.training.runs.follow.feed import Watch
from mgtutor.training.runs.follow.session import Update
from mgtutor.training.runs.follow.rank_tracebacks import FoldedLine, TracebackFold, last_exception
from mgtutor.training.runs.follow.detectors import Alert
from mgtutor.tui.commands.check import precheck
from mgtutor.tui.run_words import record_line
from mgtutor.tui.commands.options import add_backend, add_nodes, add_nproc
from mgtutor.tui.errors import CliError

LIVE = Watch()  # the live warnings' defaults: the flags' and `runs attach`'s


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "run", help=_("run a training script distributed (torchrun), keep a run record"),
        description=_("Run SCRIPT on N ranks with torchrun. Each rank writes its own log files in the run "
                      "record; this command prints them prefixed [rank R] and exits with the first failing "
                      "rank's exit code. Ctrl+C (or SIGTERM: kill, timeout, CI) stops every rank; when the "
                      "terminal goes away (SIGHUP) the run goes on: follow it again with `mgtutor runs attach ID`, "
                      "stop it with `mgtutor runs stop ID`."),
        epilog=_("examples:\n  mgtutor run -- train.py\n  mgtutor run --nproc 4 --backend gloo -- train.py --epochs 2\n"
                 "  mgtutor run -- -m mypackage.train --lr 0.1\n"
                 "  mgtutor run --nnodes 2 --node-rank 0 --rdzv-endpoint 10.0.0.1:29400 -- train.py   # on 10.0.0.1\n"
                 "  mgtutor run --nnodes 2 --node-rank 1 --rdzv-endpoint 10.0.0.1:29400 -- train.py   # on the other node\n"
                 "  mgtutor run --rendezvous-warn 10 --silent-warn 60 -- train.py   # warn sooner about a hang\n\n"
                 "While the run goes, warnings on stderr name a rank missing at the rendezvous, a straggler, or a\n"
                 "run that went silent; when the ranks stop moving, a hang report says where each one waits and why\n"
                 "(--stop-on-hang ends the run there); a failed run ends with the likely cause and its fix\n"
                 "(mgtutor diagnose RUN_ID).\n\n"
                 "The script gets its arguments exactly as given ($ included): torchrun's ${local_rank} is not\n"
                 "filled in, read LOCAL_RANK from the environment instead."),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    add_launch_options(parser)
    add_verbose_option(parser)
    parser.add_argument("--memory", action="store_true",
                        help=_("record the CUDA allocator's history in every rank (it slows each allocation); on an "
                               "OOM, save the snapshot in the run record for PyTorch's memory_viz and say what filled "
                               "the memory: parameters, gradients, optimizer state, activations, and your lines that "
                               "allocated most"))
    parser.add_argument("--no-instrument", action="store_true",
                        help=_("do not measure the script: by default every rank times its optimizer steps and "
                               "DataLoader and keeps its loss (no change to your code, no extra GPU sync per step) "
                               "and writes step events for the Monitor's charts, report and alerts"))
    parser.add_argument("target", nargs=argparse.REMAINDER, metavar="-- SCRIPT [ARGS…]",
                        help=_("the script (or -m MODULE) and its arguments, after --"))
    parser.set_defaults(func=main)


def add_launch_options(parser: argparse.ArgumentParser) -> None:
    add_nproc(parser)
    add_backend(parser)
    nodes = parser.add_argument_group(_("multi-node (torchrun c10d rendezvous; run the same command on every node)"))
    add_nodes(nodes, default=1, dest="nnodes")
    nodes.add_argument("--node-rank", type=int, default=0, metavar="R",
                       help=_("this node's rank; node 0 is the host of --rdzv-endpoint"))
    nodes.add_argument("--rdzv-endpoint", default=None, metavar="HOST:PORT",
                       help=_("node 0's address and a free port, the same on every node"))
    nodes.add_argument("--rdzv-id", default=None, metavar="ID", help=_("job id, the same on every node"))
    nodes.add_argument("--rdzv-timeout", type=int, default=None, metavar="SEC",
                        help=_("give up when the other nodes have not joined after SEC s (torchrun: 600)"))
    live = parser.add_argument_group(_("live warnings (printed on stderr while the run goes; 0 turns one off)"))
    live.add_argument("--rendezvous-warn", type=float, default=LIVE.rendezvous_after, metavar="S",
                      help=_("name the ranks that have not reached init_process_group after S s while the others "
                             "wait (default 30; PyTorch itself waits 10-30 minutes)"))
    live.add_argument("--silent-warn", type=float, default=LIVE.silent_after, metavar="S",
                      help=_("warn that the run may be hung when no rank printed anything for S s (default 120)"))
    live.add_argument("--hang-after", type=float, default=LIVE.hang_after, metavar="S",
                      help=_("when no rank printed anything for S s (or, once steps are logged, a rank's step is "
                             "10x late), take every rank's stack and print a hang report: who waits where, and why "
                             "(default 5)"))
    live.add_argument("--stop-on-hang", action="store_true",
                      help=_("stop the run after the hang report (default: report, and let it go on)"))


def add_verbose_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-v", "--verbose", action="store_true",
                        help=_("print torchrun's own tracebacks whole (by default one line says where they are: "
                               "torchrun.log in the run record); a rank's own traceback is always printed whole"))


def live_options_problem(args: argparse.Namespace) -> str | None:
    for flag, value in (("--rendezvous-warn", args.rendezvous_warn), ("--silent-warn", args.silent_warn),
                        ("--hang-after", args.hang_after)):
        if not value >= 0:  # also rejects nan
            return _("{flag} {seconds:g}: give seconds >= 0 (0 turns the warning off)").format(flag=flag, seconds=value)
    return None


def live_watch(args: argparse.Namespace) -> Watch:
    """What the flags ask the feed to watch for (0 turns a warning off); the meters are recorded once a second."""
    return Watch(rendezvous_after=args.rendezvous_warn, silent_after=args.silent_warn, hang_after=args.hang_after,
                 stop_on_hang=args.stop_on_hang)


def alert_text(alert: Alert) -> str:
    lines = ["mgtutor: " + _("warning ({kind}): {message}").format(kind=alert.kind, message=alert.message)]
    for rank, last in sorted(alert.last_lines.items()):
        shown = " | ".join(line.strip()[:120] for line in last[-3:]) or _("(no output yet)")
        lines.append("  " + _("rank {rank} last lines: {lines}").format(rank=rank, lines=shown))
    return "\n".join(lines)


def node_options(args: argparse.Namespace) -> dict:
    """The LaunchSpec fields that add_launch_options' multi-node flags set."""
    return {"nnodes": args.nnodes, "node_rank": args.node_rank, "rdzv_endpoint": args.rdzv_endpoint,
            "rdzv_id": args.rdzv_id, "rdzv_timeout": args.rdzv_timeout}


def print_node_diagnosis(run: Run, result: RunResult, err: TextIO) -> NodeDiagnosis | None:
    """On a multi-node run that never trained: which endpoint is unreachable, or who did not join."""
    meta = run.record.meta()
    if meta.nnodes < 2:
        return None
    try:
        log = run.record.torchrun_log.read_text(errors="replace")
    except OSError:
        log = ""
    finding = diagnose_node(meta, run.record.ranks(), result.status, log)
    if finding:
        print("mgtutor: " + _("diagnosis ({kind}): {evidence}").format(kind=kind_title(finding.kind), evidence=finding.evidence)
              + "\n  " + _("fix: {fix}").format(fix=finding.fix), file=err)
    return finding


def print_failure_diagnosis(run: Run, final: Update, err: TextIO | None = None) -> Finding | None:
    """A failed run ends with the classifier's top finding and its fix; `mgtutor diagnose` has the rest."""
    err = err or sys.stderr
    assert final.result is not None
    node = print_node_diagnosis(run, final.result, err)
    if final.result.status not in (RunStatus.FAILED, RunStatus.LOST):
        return None
    if final.diagnose_error:
        print("mgtutor: " + _("no diagnosis ({error})").format(error=final.diagnose_error), file=err)
        return None
    top = next((f for f in final.findings if not node or f.kind != node.kind), None)
    if top is None:
        return None
    print(diagnosis_block(top, run.record.run_id, more=len(final.findings) - 1), file=err, flush=True)
    return top


def diagnosis_block(finding: Finding, run_id: str, more: int = 0) -> str:
    who = "" if finding.rank is None else f" (rank {finding.rank})"
    lines = [_("diagnosis: {kind}{who}: {summary}").format(kind=kind_title(finding.kind), who=who, summary=finding.summary),
             "  " + _("fix: {fix}").format(fix=finding.fix)]
    for ev in finding.evidence[:2]:
        text = "".join(ch if ch.isprintable() else "?" for ch in str(ev.get("text", "")).strip())[:160]
        lines.append("  " + _("evidence: {file}:{line}  {text}").format(file=ev.get("file"), line=ev.get("line"), text=text))
    lines += patch_lines(finding)
    memory = (finding.numbers or {}).get("memory")
    if isinstance(memory, dict):
        lines += ["  " + line for line in memory_lines(memory)]
    if finding.lesson:
        lines.append("  " + _("lesson: {lesson}").format(lesson=finding.lesson))
    rest = (_(" ({count} more finding)") if more == 1 else _(" ({count} more findings)")).format(count=more) if more > 0 else ""
    lines.append("  " + _("details{more}: {command}").format(more=rest, command=f"mgtutor diagnose {run_id}"))
    return "\n".join(lines)


def put(text: str, stream: TextIO) -> None:
    """Print a line that never raises: once its reader has gone (a closed pipe, a vanished terminal),
    this and every later line go to /dev/null. Ctrl+C on `mgtutor run … | reader` ends the reader too,
    often first: the follow must go on to the signal, and stop the run, not end on BrokenPipeError."""
    try:
        print(text, file=stream, flush=True)
    except (OSError, ValueError):  # EPIPE, EIO, or a file already closed
        drop_output(stream)


def drop_output(stream: TextIO) -> None:
    """Point `stream` at /dev/null, so that what it still holds (and Python's flush at exit) goes nowhere."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
    except OSError:
        return
    try:
        os.dup2(null, stream.fileno())
        stream.flush()
    except (OSError, ValueError):  # no file descriptor (a StringIO): nothing to keep quiet
        pass
    finally:
        os.close(null)


def _print_lines(lines: list[FoldedLine], out: TextIO) -> None:
    for ranks, _stream, line in lines:
        who = "[torchrun]" if ranks is None else f"[rank {ranks[0]}]" if len(ranks) == 1 else \
            f"[ranks {','.join(map(str, ranks))}]"
        put(f"{who} {line}", out)


class FollowEnded(Exception):
    """The command stopped following with nothing more to print (detached, or the terminal is gone):
    exit with `exit_code` (128 + the signal)."""

    def __init__(self, exit_code: int) -> None:
        super().__init__(exit_code)
        self.exit_code = exit_code


def say(text: str) -> None:
    """A line on stderr, if there still is one: after SIGHUP the terminal may be gone."""
    put(text, sys.stderr)


def detach_hint(run_id: str) -> str:
    return _("the run goes on: {attach} / {stop}").format(attach=f"`mgtutor runs attach {run_id}`",
                                                          stop=f"`mgtutor runs stop {run_id}`")


def detached_text(record: RunRecord) -> str:
    """What a follower that stops following says: how to reach the run again, or that it had ended."""
    status = record.status()
    if status.terminal:
        return _("stopped following; run {id} has ended ({status}): {command}").format(
            id=record.run_id, status=status.value, command=f"mgtutor runs show {record.run_id}")
    return _("detached; {hint}").format(hint=detach_hint(record.run_id))


def stream_run(run: Run, out: TextIO = sys.stdout, watch: Watch | None = None,
               on_update: Callable[[Update], None] | None = None, *, verbose: bool = False,
               attached: bool = False, stop_on_interrupt: bool = True, pending: Sequence[int] = ()) -> Update:
    """Print every line prefixed with its rank until the run ends, and each live warning once on stderr
    (`watch`: what the feed watches for; None: no live warnings, no meters); `on_update` sees every
    update (e.g. for a progress line). Ctrl+C, Ctrl+\\ and SIGTERM stop every rank (exit 128+N); SIGHUP
    detaches: the run goes on, and FollowEnded is raised. `attached`: a run started elsewhere, only its
    new lines; `stop_on_interrupt=False`: Ctrl+C and SIGTERM detach too. `pending`: signals that came
    while the run was being launched (handled first; pass the live list of the `deferred()` around the
    launch, still open, so none falls between it and this follow).
    Returns the final update: the result, and the diagnosis of a failed run."""
    signum: int | None = None
    fold = TracebackFold()  # the same traceback from several ranks once; torch's own [rankN]: prefix dropped
    with deferred() as later:  # from here to the end a signal stops the run or is noted: never lost
        feed = open_feed(run.record, run, watch=watch, verbose=verbose, from_start=not attached,
                         watcher="mgtutor runs attach" if attached else "mgtutor")
        try:
            with follow_signals(noted=(pending, later.signals)) as caught:
                for update in feed.updates():
                    caught.check()  # a signal noted since the last turn is raised here, as Interrupted
                    if _show(update, fold, out, on_update) or update.final:
                        if update.final:
                            return update
                        say("mgtutor: " + _("stopping every rank (--stop-on-hang)…"))
                        break
        except Interrupted as sig:
            if sig.detach or not stop_on_interrupt:
                feed.close()
                say("\nmgtutor: " + detached_text(run.record))
                raise FollowEnded(sig.exit_code) from None
            signum = sig.signum
        except KeyboardInterrupt:  # a SIGINT handler that was not ours
            signum = signal.SIGINT
        except Exception as exc:  # a bug in the follow must not leave the run unwatched without a word
            feed.close()
            say("\nmgtutor: " + _("following broke ({error}); {then}").format(
                error=f"{type(exc).__name__}: {exc}", then=detached_text(run.record)))
            raise FollowEnded(1) from None
        if signum is not None:
            say("\nmgtutor: " + _("stopping every rank…"))
        final = feed.stop(signum=signum)  # a second Ctrl+C is only noted: it must not cut the stop short
    if signal.SIGHUP in later.signals:
        raise FollowEnded(128 + signal.SIGHUP)  # stopped, and nobody left to tell
    _show(final, fold, out, on_update)
    stop = final.result.stop if final.result else None
    left = _("no process left") if stop is None or stop.clean else _("processes left: {pids}").format(pids=stop.survivors)
    say("mgtutor: " + _("stopped; {left}").format(left=left))
    return final


def _show(update: Update, fold: TracebackFold, out: TextIO, on_update: Callable[[Update], None] | None) -> bool:
    """One update on the terminal: its lines (the fold's), its warnings; True when --stop-on-hang stops the run."""
    _print_lines(fold.feed(update.lines, time.monotonic()) + (fold.flush() if update.final else []), out)
    if update.detector_error:
        say("mgtutor: " + _("live warnings off ({error})").format(error=update.detector_error))
    for alert in update.new_alerts:
        say(alert.text() if isinstance(alert, HangAlert) else alert_text(alert))
    if on_update is not None:
        on_update(update)
    return any(isinstance(a, HangAlert) and a.stop_run for a in update.new_alerts)


def follow_exit_code(final: Update) -> int:
    """The exit code of a command that followed a run: 128 + the signal that stopped it, else the run's."""
    assert final.result is not None
    return 128 + final.stop_signal if final.stop_signal else exit_code_for(final.result)


def describe_result(result: RunResult) -> str:
    """How the run ended, in the language in force (the record's words in English), and any output a full
    disk lost."""
    lost = dropped_note(result.extra.get(DROPPED_KEY))
    return result.describe(_) + ("\nmgtutor: " + lost if lost else "")


def what_happened(record: RunRecord, result: RunResult) -> str:
    """How the run ended, in one line; for a failed run with the first failing rank's own error."""
    said = describe_result(result)
    first = result.first_failure if result.status == RunStatus.FAILED else None
    error = last_exception(record, first.rank) if first is not None and first.rank is not None else None
    head, _newline, rest = said.partition("\n")
    return f"{head}: {error.strip()[:200]}{_newline}{rest}" if error else said


def print_end(run: Run, final: Update) -> None:
    """The end of a followed run: what happened in one line first, its record, and last (what stays on
    screen) the diagnosis of a failed run with its fix."""
    assert final.result is not None
    say(what_happened(run.record, final.result))
    put(record_line(run.record.path), sys.stdout)
    print_failure_diagnosis(run, final)


def main(args: argparse.Namespace) -> int:
    target = args.target[1:] if args.target[:1] == ["--"] else args.target
    problem = live_options_problem(args) or launch_arguments_problem(args, target)
    if problem:
        raise CliError(problem)
    precheck(target)  # static check of the script: findings only, never blocks the launch
    # Open from the launch to the exit: a signal before the follow's own handlers is noted and stops
    # the run as soon as they are in place; no moment is left to the default handler.
    with deferred() as early:
        try:
            run = launch(LaunchSpec(target=target, nproc=args.nproc, backend=args.backend, label=_label(target),
                                    env={MEMORY_ENV: "1"} if args.memory else {}, instrument=not args.no_instrument,
                                    **node_options(args)))
        except LaunchError as exc:
            raise CliError(str(exc)) from None
        meta = run.record.meta()
        say("mgtutor: " + _("{ranks} rank(s), backend {backend} — {device}").format(
            ranks=meta.world_size, backend=meta.backend, device=said_device_note(meta)))
        if meta.env.get(INSTRUMENT_ENV) == "1":
            say("mgtutor: " + _("instrumentation on: each rank's optimizer steps, data wait, samples/s, loss and "
                                "peak memory become step events (--no-instrument turns it off)"))
        if meta.nnodes > 1:
            say("mgtutor: " + _("node {node} of {nodes}, rendezvous {endpoint} id {id}, this node's address {address} "
                                "on {iface}").format(node=meta.node_rank, nodes=meta.nnodes, endpoint=meta.rdzv_endpoint,
                                                     id=meta.rdzv_id, address=meta.local_addr, iface=meta.iface))
        try:
            final = stream_run(run, watch=live_watch(args), verbose=args.verbose,
                               pending=early.signals)
        except FollowEnded as end:
            return end.exit_code
        print_end(run, final)
        return follow_exit_code(final)


def launch_arguments_problem(args: argparse.Namespace, target: list[str]) -> str | None:
    """What is wrong with --backend, --nproc or the script, said before anything else is printed
    (launch() checks them again, in the same order)."""
    try:
        plan(LaunchSpec(target=target, nproc=args.nproc, backend=args.backend))
        check_target(target)
    except LaunchError as exc:
        return str(exc)
    return None


def _label(target: list[str]) -> str:
    if not target:
        return "run"
    return target[1] if target[0] == "-m" and len(target) > 1 else target[0].rsplit("/", 1)[-1]
