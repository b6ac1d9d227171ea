"""`mgtutor runs [list|show ID] [--json]`: past and running runs from their run directories."""
from __future__ import annotations

import argparse
import json
import time

from mgtutor.training.runs.records import find_run, list_runs, runs_root


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("runs", help="list past runs (newest first) or show one",
                            description="Runs are kept in $XDG_STATE_HOME/mgtutor/runs/.",
                            epilog="examples:\n  mgtutor runs\n  mgtutor runs show 20261130-120000-train-1a2b\n"
                                   "  mgtutor runs list --json",
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", nargs="?", choices=["list", "show"], default="list")
    parser.add_argument("run_id", nargs="?", metavar="ID", help="run id, a unique part of it, or a path")
    parser.add_argument("--json", action="store_true", help="print JSON for scripts")
    parser.add_argument("-n", "--limit", type=int, default=30, help="how many runs to list (default 30)")
    parser.set_defaults(func=main)


def summary(record) -> dict:
    meta = record.meta()
    result = record.result()
    return {"id": record.run_id, "path": str(record.path), "label": meta.get("label"),
            "status": record.status(), "backend": meta.get("backend"), "world_size": meta.get("world_size"),
            "started": meta.get("started"), "duration_s": result.get("duration_s"),
            "first_failure": result.get("first_failure")}


def main(args: argparse.Namespace) -> int:
    if args.action == "show":
        if not args.run_id:
            print("mgtutor runs show: error: give a run id (see `mgtutor runs`)")
            return 2
        record = find_run(args.run_id)
        if record is None:
            print(f"mgtutor runs show: error: no single run matches {args.run_id!r} in {runs_root()}")
            return 2
        data = {"meta": record.meta(), "result": record.result(), "status": record.status(),
                "logs": [str(p) for _, _, p in record.rank_logs()]}
        if args.json:
            print(json.dumps(data, indent=2))
            return 0
        meta, result = data["meta"], data["result"]
        print(f"run {record.run_id}  [{data['status']}]\n  path     {record.path}")
        print(f"  command  {' '.join(meta.get('target', []))}")
        print(f"  ranks    {meta.get('world_size')} on {meta.get('backend')} — {meta.get('device_note')}")
        for rank in result.get("ranks", []):
            how = f"signal {rank['signal']}" if rank.get("signal") else f"exit {rank.get('exit_code')}"
            print(f"  rank {rank['rank']}: {how} ({rank.get('outcome')})")
        first = result.get("first_failure")
        print(f"  first failure: {'none' if not first else 'rank ' + str(first['rank'])}")
        for path in data["logs"]:
            print(f"  log      {path}")
        return 0
    runs = [summary(r) for _, r in zip(range(args.limit), list_runs())]
    if args.json:
        print(json.dumps(runs, indent=2))
        return 0
    if not runs:
        print(f"no runs yet in {runs_root()} — start one with `mgtutor run -- SCRIPT` or from the TUI")
        return 0
    print(f"{'ID':<40} {'STATUS':<9} {'RANKS':>5} {'BACKEND':<7} {'TIME':>8}  STARTED")
    for run in runs:
        started = time.strftime("%Y-%m-%d %H:%M", time.localtime(run["started"])) if run["started"] else "?"
        dur = f"{run['duration_s']:.1f}s" if isinstance(run["duration_s"], (int, float)) else "-"
        print(f"{run['id']:<40} {run['status']:<9} {run['world_size'] or '?':>5} {run['backend'] or '?':<7} "
              f"{dur:>8}  {started}")
    return 0
