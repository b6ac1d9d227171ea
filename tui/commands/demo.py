"""`mgtutor demo [SCENARIO]`: make a failure happen for real, watch it, then read the diagnosis."""
from __future__ import annotations

import argparse
import json


from mgtutor.training.foundation.i18n import N_, _, cell_width, ljust_cells
from mgtutor.diagnostics.failures.demos import SCENARIOS, run_demo
from mgtutor.training.runs.launch.launcher import LaunchError
from mgtutor.tui.commands.diagnose import format_finding
from mgtutor.tui.commands.options import add_backend, add_nproc
from mgtutor.tui.errors import CliError
from mgtutor.tui.run_words import record_line


def register(sub: argparse._SubParsersAction) -> None:
    names = _(", ").join(SCENARIOS)  # a list's separator: "、" in Chinese
    parser = sub.add_parser(
        "demo", help=_("reproduce a multi-GPU failure for real and diagnose it"),
        description=_("Start real ranks that fail in a known way, stream their logs, then show the diagnosis. "
                      "Scenarios: {names}. Without GPUs the ranks run on the CPU (gloo).").format(names=names),
        epilog=_("examples:\n  mgtutor demo                  list the scenarios\n  mgtutor demo never-joins\n"
                 "  mgtutor demo oom --backend nccl\n  mgtutor demo straggler --json"),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("scenario", nargs="?", metavar="SCENARIO", help=_("which failure to reproduce"))
    add_nproc(parser, default=2, help=N_("ranks to start (default 2)"))
    add_backend(parser)
    parser.add_argument("--json", action="store_true", help=_("print the outcome as JSON (no log lines)"))
    parser.set_defaults(func=main)


def scenario_table() -> str:
    """One row per scenario, the columns as wide as their longest entry (a title never runs into the
    symptom)."""
    rows = [(_("scenario"), _("what it reproduces"), _("symptom"))] + [(s.name, _(s.title), _(s.symptom)) for s in SCENARIOS.values()]
    name_w = max(cell_width(row[0]) for row in rows)
    title_w = max(cell_width(row[1]) for row in rows)
    return "\n".join(f"{ljust_cells(name, name_w)}  {ljust_cells(title, title_w)}  {symptom}".rstrip() for name, title, symptom in rows)


def main(args: argparse.Namespace) -> int:
    if not args.scenario:
        print(scenario_table())
        return 0
    if args.scenario not in SCENARIOS:
        raise CliError(_("unknown scenario {name!r}; choose from {names}").format(name=args.scenario,
                                                                               names=", ".join(SCENARIOS)))
    scenario = SCENARIOS[args.scenario]

    def show(rank: int | None, _stream: str, line: str) -> None:
        if not args.json:
            print(f"{'[torchrun]' if rank is None else f'[rank {rank}]'} {line}", flush=True)

    if not args.json:
        print(f"demo {scenario.name}: {_(scenario.what_happens)}\n", flush=True)
    try:
        outcome = run_demo(scenario.name, nproc=args.nproc, backend=args.backend, on_line=show)
    except LaunchError as exc:
        raise CliError(str(exc)) from None
    except KeyboardInterrupt:
        return 130
    expected = scenario.expected(outcome.backend)
    if args.json:
        print(json.dumps({"scenario": scenario.name, "run_id": outcome.run.record.run_id, "expected": expected,
                          "diagnosed": outcome.diagnosed, "findings": [f.to_dict() for f in outcome.findings]}, indent=2))
    else:
        print("\n" + record_line(outcome.run.record.path) + "\n")
        for index, finding in enumerate(outcome.findings, 1):
            print(format_finding(index, finding) + "\n")
        verdict = (_("diagnosis named the cause (expected {expected})") if outcome.diagnosed
                   else _("diagnosis did NOT name {expected} first (expected {expected})"))
        print(verdict.format(expected=expected) + _("; again later with: {command}").format(
            command=f"mgtutor diagnose {outcome.run.record.run_id}"))
    return 0 if outcome.diagnosed else 1
