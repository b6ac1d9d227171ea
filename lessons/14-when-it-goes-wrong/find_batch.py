"""Lesson 14, GPU: the batch that fits a plain script, found from outside it.

    python find_batch.py      (the lesson runs it for you as a one-rank step)

It does what you would type in a terminal:
    mgtutor fit --nproc 1 -- fit_me.py --batch-size 8192
and prints each trial as it ends, the answer, and the command to train with.
"""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ASKED = 8192
# This script itself runs as a rank of a small lesson run; the search's trials are runs of their own.
OUTER = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE", "ROLE_RANK",
         "ROLE_NAME", "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_", "MGTUTOR_RUN_",
         "MGTUTOR_STACKS_", "MGTUTOR_EVENTS", "TORCH_NCCL_", "TORCH_FR_")


def report(**fields):
    print("REPORT " + json.dumps(fields), flush=True)


def main():
    env = {k: v for k, v in os.environ.items() if not k.startswith(OUTER)}
    began = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "mgtutor.tui", "fit", "--nproc", "1", "--json", "--",
                           str(HERE / "fit_me.py"), "--batch-size", str(ASKED)],
                          capture_output=True, text=True, env=env, timeout=480)
    print(done.stderr[-4000:], flush=True)
    answer = json.loads(done.stdout) if done.returncode == 0 and done.stdout.strip() else {}
    trials = answer.get("trials", [])
    command = (answer.get("command") or {}).get("argv")
    if command:
        print("train with: " + " ".join(command), flush=True)
    largest = answer.get("largest_batch", 0)
    report(largest=largest, recommended=answer.get("recommended_batch", 0), trials=len(trials),
           seconds=round(time.monotonic() - began, 1),
           asked_too_much=0 < largest < ASKED and any(not t["fits"] for t in trials))


if __name__ == "__main__":
    main()
