"""The failure demos' real runs, each made once per test worker (issue 41).

`zh_demo_crash_run`: `mgtutor --lang zh demo crash --nproc 2` (the real trainer on two gloo ranks, rank 1
raising at step 3), with its own XDG homes. test_demos.py checks on it what every demo must do (it ran for
real, streamed its lines, ended, and the classifier named rank 1's failure first, through `mgtutor diagnose
--json`); the Chinese leak test of every command (test_zh_every_command_runs.py::test_demo) can read what
it printed instead of making the same run again, test_train_inject.py reads `--inject crash-rank`'s
failure from its record, and test_report_browser.py reports on a copy of it. Tests that take it carry
@pytest.mark.xdist_group("zh_demo_crash"), so one worker makes the run for all.

`demo_run(name)`: `run_demo(name, nproc=2, backend="gloo")` in process, as test_demos.py runs every other demo;
on one rank where each rank fails alike (`ONE_RANK`), through the stand-in torchrun where torchrun has no part in
what is checked (`STANDIN`).
The trainer demos are the trainer with an `--inject` mode (diagnostics/failures/demos.py, `_trainer`), the very
runs test_train_inject.py needs to see each mode's real failure: the two tests of one such demo read its one run
(`INJECT_OF`), and carry `demo_group(name)` (xdist group `demo_NAME`) so that one worker makes it.

Import the fixtures into the test module that uses them (`from tests.demo_runs import demo_run  # noqa: F401`).
A fixture imported into two modules is two fixtures to pytest, one per module: the runs themselves are kept
here, in MADE, so the second returns the first's."""
from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from mgtutor.diagnostics.failures.demos import SCENARIOS, DemoOutcome, run_demo
from tests.conftest import STANDIN_LAUNCHER, homes_under, mgtutor_argv

GROUP = "zh_demo_crash"

# The demos whose run test_train_inject.py checks too: demo → the trainer's --inject mode it runs.
INJECT_OF = {"never-joins": "hang-before-init", "oom": "oom", "crash": "crash-rank", "nan-loss": "nan-loss",
             "unused-param": "unused-param", "straggler": "slow-rank"}
# Demos whose failure every rank hits alike, the same on one rank as on two: DDP's unused-parameter error is each
# rank's own reducer's; a script that asks for one rank more than started leaves each rank waiting in init.
ONE_RANK = {"unused-param", "world-size"}
# Demos on real ranks whose torchrun has no part in what is checked; the stand-in saves the agent's `import torch`.
# no-sampler and straggler end well (the real trainer and DDP on gloo): no torchrun output or rendezvous is read.
# stuck-loader hangs in a real gloo all_reduce, and the report is the ranks' stacks; the same hang on ranks torchrun
# started, stopped and diagnosed amid its output: test_hang_cli.py. (world-size stays on torchrun: its ranks wait in
# the rendezvous, torchrun's store.)
STANDIN = {"no-sampler", "straggler", "stuck-loader"}


def inject_mode(name: str) -> str:
    """The `--inject` mode demo `name` gives the trainer (the argv of SCENARIOS, not a copy of it)."""
    target = SCENARIOS[name].target
    return target[target.index("--inject") + 1]


def demo_group(name: str) -> pytest.MarkDecorator:
    """The xdist group of the tests that read demo `name`'s one run."""
    return pytest.mark.xdist_group(GROUP if name == "crash" else f"demo_{name}")


@dataclass(frozen=True)
class DemoRun:
    proc: subprocess.CompletedProcess[str]
    record: Path  # the run's folder ($MGTUTOR_RECORD_FILE: never read from the translated line)
    env: dict[str, str]  # the environment it ran with (its XDG homes): for commands that read its record


MADE: dict[str, Any] = {}  # this worker's runs (GROUP, a demo's name), whichever module's fixture made them


@pytest.fixture(scope="session")
def zh_demo_crash_run(tmp_path_factory: pytest.TempPathFactory) -> DemoRun:
    if GROUP not in MADE:
        MADE[GROUP] = make_zh_demo_crash_run(tmp_path_factory.mktemp(GROUP))
    return MADE[GROUP]


def make_zh_demo_crash_run(home: Path) -> DemoRun:
    kept = home / "record"
    env = {**os.environ, "LANGUAGE": "en", "MGTUTOR_NO_NVML": "1", "MGTUTOR_RECORD_FILE": str(kept),
           **homes_under(home)}
    proc = subprocess.run(mgtutor_argv("--lang", "zh", "demo", "crash", "--nproc", "2"), capture_output=True,
                          text=True, timeout=240, env=env, stdin=subprocess.DEVNULL)
    assert kept.is_file(), proc.stdout[-2000:] + proc.stderr[-2000:]
    return DemoRun(proc, Path(kept.read_text().strip()), env)


@dataclass(frozen=True)
class StreamedDemo:
    outcome: DemoOutcome  # its run (the record), result and findings
    lines: list[str]  # every line it streamed to on_line


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], StreamedDemo]:
    """`demo_run(name)`: demo `name` run for real on 2 gloo ranks (1 in ONE_RANK) the first time a test of this
    worker asks for it, the same run after that. Its records live in XDG homes of its own (a test's are gone after
    it)."""
    from mgtutor.training.runs.launch.launcher import LAUNCHER_ENV

    def run(name: str) -> StreamedDemo:
        if name not in MADE:
            home = tmp_path_factory.mktemp(f"demo_{name}")
            lines: list[str] = []
            with pytest.MonkeyPatch.context() as env:
                env.setenv("MGTUTOR_NO_NVML", "1")
                env.setenv("LANGUAGE", "en")
                for var, path in homes_under(home).items():
                    env.setenv(var, path)
                if name in STANDIN:
                    env.setenv(LAUNCHER_ENV, STANDIN_LAUNCHER)
                else:
                    env.delenv(LAUNCHER_ENV, raising=False)  # the real torchrun, whichever test asks first
                outcome = run_demo(name, nproc=1 if name in ONE_RANK else 2, backend="gloo",
                                   on_line=lambda _r, _s, line: lines.append(line))
            MADE[name] = StreamedDemo(outcome, lines)
        return MADE[name]

    return run
