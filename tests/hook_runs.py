"""Real `mgtutor run --nproc 2` of a plain script (no mgtutor import, gloo on CPU) that the ranks' hook
measures (issue 43). The run of tests/data/plain_ddp.py is made once per test worker (the `plain_ddp_run`
fixture of conftest.py) for every test that reads a hook-measured record: its step events, the Monitor,
`report`, `runs show`. Each run has its own XDG homes, always ends (SIGTERM to the CLI after `timeout`,
which stops every rank, then SIGKILL) and leaves no process behind."""
from __future__ import annotations

import os
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import homes_under, mgtutor_argv

DATA = Path(__file__).parent / "data"
PLAIN_DDP = DATA / "plain_ddp.py"


@dataclass(frozen=True)
class HookRun:
    proc: subprocess.CompletedProcess[str]
    record: Path  # the run's folder


def mgtutor_run(home: Path, script: Path, *flags: str, nproc: int = 2, timeout: float = 240) -> HookRun:
    """`mgtutor run [FLAGS] --nproc NPROC -- SCRIPT` with `home`'s XDG folders; the run's record."""
    env = {**os.environ, "LANGUAGE": "en", "MGTUTOR_NO_NVML": "1",
           **homes_under(home)}
    argv = mgtutor_argv("run", *flags, "--nproc", str(nproc), "--", str(script))
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) as cli:
        try:
            out, err = cli.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            cli.send_signal(signal.SIGTERM)  # the CLI stops every rank of its run on SIGTERM
            try:
                out, err = cli.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                cli.kill()
                out, err = cli.communicate()
            raise AssertionError(f"mgtutor run of {script.name} still going after {timeout} s:\n{err}\n{out}")
    proc = subprocess.CompletedProcess(argv, cli.returncode, out, err)
    lines = [line for line in out.splitlines() if line.startswith("run record: ")]
    assert proc.returncode == 0 and lines, err + out
    return HookRun(proc, Path(lines[0].removeprefix("run record: ")))
