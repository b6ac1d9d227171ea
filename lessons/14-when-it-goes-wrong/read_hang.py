"""Lesson 14: make a run hang on purpose, and read mgtutor's hang report instead of waiting 30 minutes.

    python read_hang.py --mode slow-loader     (the lesson runs it for you as a one-rank step)

It does what you would type in a terminal:
    mgtutor run --nproc 2 --backend gloo --stop-on-hang -- hang.py --mode slow-loader
    mgtutor diagnose RUN_ID --json
and prints the report: which rank is the odd one, and the line where each rank waits.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
# This script itself runs as a rank of a small lesson run; the hang it starts is a separate run.
OUTER = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE", "ROLE_RANK",
         "ROLE_NAME", "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_", "MGTUTOR_RUN_",
         "MGTUTOR_STACKS_", "MGTUTOR_EVENTS", "TORCH_NCCL_", "TORCH_FR_")


def report(**fields):
    print("REPORT " + json.dumps(fields), flush=True)


def mgtutor(*args, **kwargs):
    return subprocess.run([sys.executable, "-m", "mgtutor.tui", *args], text=True, **kwargs)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", default="slow-loader", choices=["world-size", "skip-allreduce", "slow-loader"])
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if not k.startswith(OUTER)}
    with tempfile.TemporaryDirectory() as folder:
        # mgtutor writes the run record's path there: its own line for it follows the user's language
        env["MGTUTOR_RECORD_FILE"] = str(Path(folder) / "record")
        began = time.monotonic()
        run = mgtutor("run", "--nproc", "2", "--backend", "gloo", "--stop-on-hang", "--",
                      str(HERE / "hang.py"), "--mode", args.mode, capture_output=True, env=env, timeout=240)
        seconds = time.monotonic() - began
        written = Path(env.pop("MGTUTOR_RECORD_FILE"))
        record = written.read_text().strip() if written.exists() else None
    print(run.stderr[-3000:], flush=True)
    if not record:
        report(kind=None, why="mgtutor run wrote no run record")
        return
    diagnosed = mgtutor("diagnose", record, "--json", capture_output=True, env=env, timeout=120)
    findings = json.loads(diagnosed.stdout or "{}").get("findings") or [{}]
    top = findings[0]
    for rank, where in sorted((top.get("where") or {}).items()):
        print(f"rank {rank} waits at {Path(str(where.get('file'))).name}:{where.get('line')} "
              f"in {where.get('function')} ({where.get('category')})", flush=True)
    report(kind=top.get("kind"), ranks=top.get("ranks"), named_rank_1=1 in (top.get("ranks") or []),
           stopped_in_s=round(seconds, 1))


if __name__ == "__main__":
    main()
