"""Time from `mgtutor` start to the first painted Home screen, in a real pseudo-terminal (80×24).

    python tests/bench/startup.py [--runs 5]

Starts the installed `mgtutor` console script under a pty, reads what it draws until the Home
screen's text appears, records the elapsed wall time, then presses q. Prints each run and the median.
"""
from __future__ import annotations

import argparse
import fcntl
import os
import pty
import re
import select
import shutil
import statistics
import struct
import sys
import termios
import time

MARKER = b"way forward"  # the Home screen's static text
MACHINE = re.compile(rb"No NVIDIA GPU|NVIDIA GPU\(s\)")  # the machine summary, filled in by a worker
ANSI = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Z0-9]|\x1b\][^\x07]*\x07")


def one_run(command: list[str], timeout: float = 20.0) -> tuple[float, float]:
    start = time.perf_counter()
    pid, fd = pty.fork()
    if pid == 0:
        os.environ.update(TERM="xterm-256color", COLUMNS="80", LINES="24")
        os.execvp(command[0], command)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    seen = b""
    elapsed = machine = None
    try:
        while time.perf_counter() - start < timeout:
            ready, _, _ = select.select([fd], [], [], 0.05)
            if not ready:
                continue
            try:
                seen += os.read(fd, 65536)
            except OSError:
                break
            text = ANSI.sub(b"", seen)
            if elapsed is None and MARKER in text:
                elapsed = time.perf_counter() - start
            if machine is None and MACHINE.search(text):
                machine = time.perf_counter() - start
            if elapsed is not None and machine is not None:
                break
        os.write(fd, b"q")
        deadline = time.perf_counter() + 10
        while time.perf_counter() < deadline:
            done, _ = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            select.select([fd], [], [], 0.05)
            try:
                os.read(fd, 65536)
            except OSError:
                pass
        else:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
    finally:
        os.close(fd)
    if elapsed is None or machine is None:
        raise SystemExit("the Home screen never appeared")
    return elapsed, machine


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--command", default=shutil.which("mgtutor") or os.path.join(os.path.dirname(sys.executable), "mgtutor"))
    args = parser.parse_args()
    one_run([args.command])  # warm the file cache once; not counted
    runs = [one_run([args.command]) for _ in range(args.runs)]
    for i, (home, machine) in enumerate(runs, 1):
        print(f"run {i}: Home painted {home * 1000:.0f} ms, machine summary {machine * 1000:.0f} ms")
    print(f"median of {len(runs)}: Home painted {statistics.median(r[0] for r in runs) * 1000:.0f} ms, "
          f"machine summary {statistics.median(r[1] for r in runs) * 1000:.0f} ms")


if __name__ == "__main__":
    main()
