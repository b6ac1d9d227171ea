"""Sum the suite's CPU by kind of process, from the lines proc_cpu/sitecustomize.py wrote:

    PROC_CPU_LOG=/tmp/procs.jsonl PYTHONPATH=$PWD/tests/bench/proc_cpu MGTUTOR_TEST_CPU=/tmp/tests.txt python -m pytest
    python tests/bench/proc_cpu.py /tmp/procs.jsonl [--tests /tmp/tests.txt]

The folder on PYTHONPATH must be absolute: runs start their ranks in their script's folder (a lesson's, a test's
temporary one), where a relative one finds nothing, and those ranks would write no line.

With --tests (MGTUTOR_TEST_CPU's file) it also says how much of the tests' CPU no line accounts for: the test
workers' own work and the processes that were killed or left by os._exit."""
from __future__ import annotations

import argparse
import collections
import json
from pathlib import Path


def kind(record: dict) -> str:
    argv = " ".join(record["argv"])
    if "exec(eval(sys.stdin" in argv:
        return "pytest-xdist worker (the tests in process)"
    if "standin/torchrun.py" in argv:
        return "stand-in torchrun"
    if "torch.distributed.run" in argv or "bin/torchrun" in argv:
        return "torchrun's agent (imports torch)"
    if "mgtutor.training.runs.launch.rank" in argv:
        return "mgtutor's rank wrapper"
    if "mgtutor.training.runs.launch.supervise" in argv:
        return "mgtutor's supervisor"
    module = record["argv"][record["argv"].index("-m") + 1] if "-m" in record["argv"][:-1] else ""
    if module in ("mgtutor", "mgtutor.tui") or record["argv"][0].endswith("bin/mgtutor"):
        return "mgtutor CLI"
    if record["dynamo"]:
        return "torch and torch._dynamo (DDP ranks, compile)"
    if record["torch"]:
        return "torch (ranks, probes)"
    return "other Python"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("log", type=Path)
    parser.add_argument("--tests", type=Path, help="MGTUTOR_TEST_CPU's file of the same run")
    args = parser.parse_args()
    latest: dict[int, dict] = {}  # a process that ran its exit functions twice (a test of them) counts once
    for line in args.log.read_text().splitlines():
        record = json.loads(line)
        latest[record["pid"]] = record
    sums: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0])
    for record in latest.values():
        row = sums[kind(record)]
        row[0] += 1
        row[1] += record["cpu"]
    print("| process | processes | CPU s | CPU s each |\n|---|---|---|---|")
    for name, (count, cpu) in sorted(sums.items(), key=lambda item: -item[1][1]):
        print(f"| {name} | {count:.0f} | {cpu:,.0f} | {cpu / count:.2f} |")
    logged = sum(cpu for _, cpu in sums.values())
    print(f"| all that wrote a line | {sum(c for c, _ in sums.values()):.0f} | {logged:,.0f} | |")
    if args.tests:
        tests = sum(float(line.split("\t")[0]) for line in args.tests.read_text().splitlines() if line)
        workers = sums["pytest-xdist worker (the tests in process)"][1]
        print(f"\ntests' CPU (MGTUTOR_TEST_CPU): {tests:,.0f} s; no line for {tests - (logged - workers) - workers:,.0f} s "
              "(processes killed or ended by os._exit, and programs that are not Python)")


if __name__ == "__main__":
    main()
