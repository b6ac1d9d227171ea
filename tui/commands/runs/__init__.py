"""`mgtutor runs [list|show ID|stacks ID|stop ID|attach ID] [--json]`: past and running runs from their
run directories, and control of a running one from any shell."""
from __future__ import annotations

import argparse
import json
import math
import os
import time
from typing import Any

from mgtutor.training.foundation.i18n import N_, _, cell_width, ljust_cells, rjust_cells
from mgtutor.training.runs.events.types import StepEvent
from mgtutor.training.runs.follow.summary import last_steps
from mgtutor.training.runs.forensics.stacks import INSTRUMENT_ENV
from mgtutor.training.runs.launch.launcher import said_device_note
from mgtutor.training.runs.records.record import (RunRecord, RunStatus, list_runs, runs_root, runs_root_problem,
                                                  said_problem)
from mgtutor.training.foundation.secrets import SecretRedactor, secret_values
from mgtutor.training.foundation.terminal import neutralise
from mgtutor.tui.commands.runs.control import (
    add_control_options,
    attach_main,
    is_detached,
    status_text,
    stop_main,
    the_run,
)
from mgtutor.tui.commands.runs.stacks import stacks_main
from mgtutor.tui.errors import CliError
from mgtutor.tui.run_words import outcome_word, status_word

ACTIONS = (("list", N_("past runs, newest first (the default)")), ("show", N_("one run: its ranks and logs")),
           ("stacks", N_("every rank's Python stack now, and why it waits")),
           ("stop", N_("stop a running run from any shell: every rank SIGTERM, then SIGKILL; exit 1 if a process "
                       "survives")),
           ("attach", N_("follow a running run's new lines and live warnings (Ctrl+C detaches)")))


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("runs", help=_("list past runs (newest first), show one, stop or follow a running one"),
                            description=_("Runs are kept in $XDG_STATE_HOME/mgtutor/runs/. A run whose command is "
                                          "gone (terminal closed) goes on and is listed 'running, detached': "
                                          "`runs attach ID` follows it again, `runs stop ID` stops it."),
                            epilog=_("examples:\n  mgtutor runs\n  mgtutor runs show 20261130-120000-train-1a2b\n"
                                     "  mgtutor runs list --json\n"
                                     "  mgtutor runs stacks 20261130-1200     every rank's Python stack now, and why it waits\n"
                                     "  mgtutor runs attach 1a2b              follow its new lines (Ctrl+C detaches)\n"
                                     "  mgtutor runs stop 1a2b --json         every rank SIGTERM, then SIGKILL; exit 1 if any survives"),
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    # subcommands, so that `runs attach --stop ID` parses as well as `runs attach ID --stop`
    parser.add_argument("--json", action="store_true", help=_("print JSON for scripts"))
    parser.add_argument("-n", "--limit", type=int, default=30, help=_("how many runs to list (default 30)"))
    actions = parser.add_subparsers(dest="action", metavar="{list,show,stacks,stop,attach}")
    for name, what in ACTIONS:
        action = actions.add_parser(name, help=_(what), description=_(what))
        if name != "list":
            action.add_argument("run_id", nargs="?", metavar="ID", help=_("run id, a unique part of it, or a path"))
        # SUPPRESS: absent here, the value given before the subcommand (mgtutor runs --json list) stands
        if name != "attach":
            action.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                                help=_("print JSON for scripts"))
        if name == "list":
            action.add_argument("-n", "--limit", type=int, default=argparse.SUPPRESS,
                                help=_("how many runs to list (default 30)"))
        if name == "stacks":
            action.add_argument("--native", action="store_true",
                                help=_("native frames too (NCCL, CUDA, C++), where py-spy may read them: "
                                       "each rank pauses for the moment it is read"))
        add_control_options(action, name)
    parser.set_defaults(func=main)


def summary(record: RunRecord) -> dict:
    """One run as `runs list --json` prints it (a view: the JSON a script reads)."""
    meta = record.meta()
    result = record.result()
    first = result.first_failure
    status = record.status()
    out = {"id": record.run_id, "path": str(record.path), "label": meta.label or None,
           "status": status.value, "detached": is_detached(record, status),
           "backend": meta.backend or None, "world_size": meta.world_size or None,
           "started": meta.started, "duration_s": result.duration_s,
           "first_failure": first.to_json() if first else None}
    problems = record.problems()
    if problems:
        out["problem"] = "; ".join(problems)
        out["unreadable"] = record.unreadable()
    return out


def main(args: argparse.Namespace) -> int:
    args.action = args.action or "list"
    args.run_id = getattr(args, "run_id", None)
    if args.action == "stacks":
        return stacks_main(args.run_id, args.json, native=getattr(args, "native", False))
    if args.action == "stop":
        return stop_main(args)
    if args.action == "attach":
        return attach_main(args)
    if args.action == "show":
        return show(the_run(args.run_id, "show"), args.json)
    return list_main(args.limit, args.json)


def say(line: str) -> None:
    """One line on stdout with what a record says neutralised: a record's text (its command, label, backend,
    a folder's name) is anyone's, and an escape in it must not reach the terminal."""
    print(neutralise(line))


def show(record: RunRecord, as_json: bool) -> int:
    meta, result, status = record.meta(), record.result(), record.status()
    problems = record.problems()
    logs = [str(p) for _, _, p in record.rank_logs()]
    clean = SecretRedactor(os.environ)  # what it shows is cleaned as a report is (secrets.py)
    clean.learn_digests(meta.secret_digests)
    clean.learn_values(secret_values({}, [str(arg) for arg in meta.target]))
    if as_json:
        shown_meta = {**meta.to_json(), "env": clean.env(meta.env),  # a record kept before secrets were hidden
                      "target": clean.argv([str(a) for a in meta.target]),
                      "torchrun_argv": clean.argv([str(a) for a in meta.torchrun_argv])}
        shown_meta.pop("secret_digests", None)
        steps, _partly = last_steps(record.events_path)
        print(json.dumps({"meta": shown_meta, "result": result.to_json(), "status": status.value,
                          "detached": is_detached(record, status),
                          "steps": [step_json(steps[r]) for r in sorted(steps)],
                          "logs": logs, **({"problem": "; ".join(problems)} if problems else {})}, indent=2))
        return 0
    say(_("run {id}  [{status}]").format(id=record.run_id, status=status_text(record, status)) + "\n  "
        + _("path     {path}").format(path=record.path))
    if status == RunStatus.RUNNING:
        say("  " + _("control  {attach} / {stop}").format(attach=f"mgtutor runs attach {record.run_id}",
                                                       stop=f"mgtutor runs stop {record.run_id}"))
    unreadable = record.unreadable() or (meta.problem is not None and not meta.problem.startswith("meta.json has"))
    if meta.problem:
        say("  " + (_("meta     {problem}: what follows comes from the other files") if unreadable
                    else _("meta     {problem}: those fields are left out")).format(problem=said_problem(meta.problem)))
    if result.problem:
        say("  " + _("result   {problem}: those fields are left out").format(problem=said_problem(result.problem)))
    unknown = _("unknown (meta.json is unreadable)") if unreadable else _("unknown")
    say("  " + _("command  {command}").format(command=" ".join(clean.argv([str(a) for a in meta.target])) or unknown))
    if unreadable or not meta.world_size:
        ranks, backend, note = len(result.ranks) or _("unknown"), result.backend or meta.backend, ""
    else:
        ranks, backend = meta.world_size, meta.backend
        note = f" — {said_device_note(meta)}" if meta.device_note else ""
    say("  " + (_("ranks    {ranks} on {backend}") if backend else _("ranks    {ranks} on an unknown backend")).format(
        ranks=ranks, backend=backend) + note)
    for rank in result.ranks:
        how = (_("signal {signal}").format(signal=rank.signal) if rank.signal else
               _("exit {code}").format(code=rank.exit_code) if rank.exit_code is not None else _("exit unknown"))
        say("  " + _("rank {rank}: {how} ({outcome})").format(rank=rank.rank, how=how, outcome=outcome_word(rank.outcome)))
    first = result.first_failure
    say("  " + _("first failure: {rank}").format(rank=_("none") if not first else f"rank {first.rank}"))
    for line in steps_lines(record, meta.world_size if not unreadable else 0):
        say("  " + line)
    for path in logs:
        say("  " + _("log      {path}").format(path=path))
    return 0


STEP_FIELDS = ("step", "origin", "step_s", "data_wait_s", "compute_s", "samples_per_s", "loss", "mem_peak_mib",
               "mem_alloc_mib", "lr")


def step_json(event: StepEvent) -> dict[str, Any]:
    """A rank's last step event for `runs show --json`: its rank, time and measured fields."""
    return {"rank": event.rank, "t": event.t, **{name: value for name in STEP_FIELDS
                                                 if (value := getattr(event, name)) is not None}}


def steps_lines(record: RunRecord, world_size: int) -> list[str]:
    """Each rank's last logged step: step time, data wait, samples/s, loss, peak memory; for a user's
    script (the ranks' hook measured it) a word on where the numbers come from, or why there are none."""
    steps, partly = last_steps(record.events_path)
    instrumented = record.meta().env.get(INSTRUMENT_ENV) == "1"
    if not steps:
        return [_("steps    none: no optimizer steps were seen (a script that never steps a torch optimizer "
                  "writes no step events)")] if instrumented else []
    hooked = any(e.origin == "hook" for e in steps.values())
    lines = [_("steps    each rank's last logged step, measured by the ranks' hook (the script is unchanged)")
             if hooked else _("steps    each rank's last logged step")]
    for rank in sorted(set(steps) | set(range(max(0, min(world_size, 1024))))):
        event = steps.get(rank)
        if event is None:
            lines.append(_("rank {rank}: no step logged").format(rank=rank)
                         + (" " + _("(in the last part of events.jsonl)") if partly else ""))
            continue
        lines.append(_("rank {rank}: {facts}").format(rank=rank, facts=_(", ").join(step_facts(event))))
    return lines


def step_facts(event: StepEvent) -> list[str]:
    facts = [_("step {step}").format(step=event.step)]
    if (step_s := _finite(event.step_time())) is not None:
        facts.append(_("{time}/step").format(time=_duration(step_s)))
    if (wait := _finite(event.data_wait_s)) is not None:
        facts.append(_("data wait {time}").format(time=_duration(wait)))
    if (speed := _finite(event.samples_per_s)) is not None:
        facts.append(_("{speed} samples/s").format(speed=f"{speed:,.0f}"))
    loss = _finite(event.loss, keep_nan=True)
    if loss is not None:
        facts.append(_("loss {loss}").format(loss=f"{loss:.4g}"))
    if (peak := _finite(event.mem_peak_mib)) is not None:
        facts.append(_("peak memory {mib} MiB").format(mib=f"{peak:,.0f}"))
    return facts


def _finite(value: object, keep_nan: bool = False) -> float | None:
    """A number the record holds (a loss of "nan" too, with keep_nan); None for anything else."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    try:
        number = float(value)
    except (ValueError, OverflowError):
        return None
    return number if math.isfinite(number) or (keep_nan and isinstance(value, str)) else None


def _duration(seconds: float) -> str:
    if seconds >= 1 or seconds == 0:
        return f"{seconds:.3g} s"
    return f"{seconds * 1000:.3g} ms" if seconds >= 1e-3 else f"{seconds * 1e6:.3g} µs"


def list_main(limit: int, as_json: bool) -> int:
    runs = [summary(r) for _, r in zip(range(limit), list_runs())]
    if as_json:
        print(json.dumps(runs, indent=2))
        return 0
    if not runs and runs_root_problem():
        raise CliError(_("{problem}: no run can be listed").format(problem=runs_root_problem()))
    if not runs:
        print(_("no runs yet in {folder} — start one with `mgtutor run -- SCRIPT` or from the TUI").format(
            folder=runs_root()))
        return 0
    shown = [status_word("running, detached" if run["detached"] else "unreadable" if run.get("unreadable")
                         else run["status"]) for run in runs]
    heads = [_("ID"), _("STATUS"), _("RANKS"), _("BACKEND"), _("TIME"), _("STARTED")]
    wide = max(cell_width(word) for word in [*shown, heads[1]])
    print(" ".join([ljust_cells(heads[0], 40), ljust_cells(heads[1], wide), rjust_cells(heads[2], 5),
                    ljust_cells(heads[3], 7), rjust_cells(heads[4], 8)]) + "  " + heads[5])
    for run, status in zip(runs, shown):
        started = time.strftime("%Y-%m-%d %H:%M", time.localtime(run["started"])) if run["started"] else "?"
        dur = f"{run['duration_s']:.1f}s" if isinstance(run["duration_s"], (int, float)) else "-"
        say(f"{run['id']:<40} {ljust_cells(status, wide)} {run['world_size'] or '?':>5} {run['backend'] or '?':<7} "
            f"{dur:>8}  {started}")
        if run.get("problem"):
            say("  " + _("unreadable in part: {problem}").format(problem=run["problem"]))
    return 0
