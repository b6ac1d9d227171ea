"""Lesson 05's exercise checked for real through the CLI, once per test worker (issue 41): `mgtutor lessons check 05`
(the learner's workspace copy, as given: the broken exercise) and `mgtutor lessons check 05 --solution` (example.py,
which is also the lesson's first step, run the same way). Three tests read these two runs instead of making their own:

- test_lessons_runs.py::test_cli_check_exit_codes_on_workspace_and_solution: the CLI's exit codes and output;
- test_lessons_runs.py::test_lesson_steps_on_cpu[05-distributed-sampler]: the two records judged with the lesson's
  checks (the broken exercise fails, the first step's run passes), as `run_step` judges a run it made;
- test_lessons_tui.py::test_lesson5_broken_then_fixed_then_resumed: the Lessons screen checks a workspace copy whose
  ranks print, through the torch-free stand-in torchrun, what the ranks of these runs printed (`replay`).

Each of them carries @pytest.mark.xdist_group("lesson05"), so they share one worker and the runs are made once.
The runs have XDG homes of their own (their progress and workspace too) and always end."""
from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from mgtutor.training.runs.records.record import RunRecord
from tests.conftest import homes_under, mgtutor_argv

LESSON = "05-distributed-sampler"
GROUP = pytest.mark.xdist_group("lesson05")


@dataclass(frozen=True)
class CliCheck:
    proc: subprocess.CompletedProcess[str]
    record: Path                 # the run's folder ("run record: PATH" in the CLI's output)
    progress_done: bool          # whether the learner's progress said the lesson was done afterwards
    workspace: str | None        # the workspace copy the check ran, as it was (None for --solution)


@dataclass(frozen=True)
class Lesson05Checks:
    broken: CliCheck             # `mgtutor lessons check 05`: the workspace copy as given
    solution: CliCheck           # `mgtutor lessons check 05 --solution`


def cli_check(home: Path, *flags: str) -> CliCheck:
    from mgtutor.lessons.loader import get_lesson
    from mgtutor.lessons.progress import Progress
    from mgtutor.training.runs.launch.launcher import LAUNCHER_ENV

    env = {**os.environ, "MGTUTOR_NO_NVML": "1", "LANGUAGE": "en",
           **homes_under(home)}
    env.pop(LAUNCHER_ENV, None)  # the real torchrun, whichever test asks first
    proc = subprocess.run(mgtutor_argv("lessons", "check", "05", *flags), capture_output=True, text=True, env=env,
                          timeout=300)
    lines = [line.strip() for line in proc.stdout.splitlines() if line.strip().startswith("run record: ")]
    assert len(lines) == 1, proc.stdout + proc.stderr
    workspace = home / "xdg_data_home" / "mgtutor" / "workspace" / get_lesson(LESSON).exercise.workspace_name
    return CliCheck(proc, Path(lines[0].removeprefix("run record: ")),
                    Progress(home / "xdg_data_home" / "mgtutor" / "progress.json").done(LESSON),
                    None if flags else workspace.read_text())


_MADE: dict[str, Lesson05Checks] = {}  # per worker: the fixture is imported into two test modules


@pytest.fixture(scope="session")
def lesson05_cli(tmp_path_factory: pytest.TempPathFactory) -> Lesson05Checks:
    """The two CLI checks of lesson 05, run once per worker (see the module's docstring)."""
    if LESSON not in _MADE:
        home = tmp_path_factory.mktemp("lesson05")
        for path in homes_under(home).values():
            Path(path).mkdir()
        broken = cli_check(home)
        _MADE[LESSON] = Lesson05Checks(broken, cli_check(home, "--solution"))
    return _MADE[LESSON]


def replay(record: Path) -> str:
    """A torch-free rank program that prints, on stdout and stderr, what its rank of the recorded run printed there,
    and exits with that rank's exit code: the ranks' words of a real run, for a test of what mgtutor does with them."""
    run = RunRecord(record)
    result = run.result()
    printed = {rank.rank: (run.rank_log(rank.rank, "stdout").read_text(errors="replace"),
                           run.rank_log(rank.rank, "stderr").read_text(errors="replace"), rank.exit_code or 0)
               for rank in result.ranks}
    return ("import os, sys\n"
            f"PRINTED = {printed!r}\n"
            "out, err, code = PRINTED[int(os.environ['RANK'])]\n"
            "sys.stdout.write(out)\nsys.stdout.flush()\nsys.stderr.write(err)\nsys.stderr.flush()\n"
            "sys.exit(code)\n")
