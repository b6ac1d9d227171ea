"""A full state disk never ends the user's training, nor mgtutor in a traceback (issue 46, item 8).

The state folder is a small tmpfs mounted for the test (mounting needs root: skipped where it cannot
mount); the runs are real `mgtutor run` / `mgtutor train` processes. The run that fills the disk starts its
ranks through the stand-in torchrun (what is tested is mgtutor's writing of their output; torchrun's part of a
run that ends well: tests/test_launcher.py::test_two_ranks_allreduce_and_print)."""
from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import mgtutor_argv, no_gpu_env

pytestmark = pytest.mark.integration

CHATTY = """import os
rank = os.environ["RANK"]
for i in range(800):
    print(f"line {i} " + "x" * 8000)
with open(os.path.join(os.environ["DONE_DIR"], "done" + rank), "w") as done:
    done.write("trained")
"""


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Callable[..., Path]]:
    """mount(size=…, inodes=…) -> a fresh tmpfs of that size, the state folder of the CLI runs below."""
    mounted: list[Path] = []

    def mount(size: str, inodes: int | None = None) -> Path:
        point = tmp_path / f"disk{len(mounted)}"
        point.mkdir()
        options = f"size={size},mode=0700" + (f",nr_inodes={inodes}" if inodes else "")
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(point)], capture_output=True,
                              text=True)
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
        mounted.append(point)
        return point

    yield mount
    for point in mounted:
        subprocess.run(["umount", "-l", str(point)], check=False)


def _mgtutor(state: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(no_gpu_env(), XDG_STATE_HOME=str(state), DONE_DIR=str(cwd))
    return subprocess.run(mgtutor_argv(*args), env=env, cwd=cwd, capture_output=True, text=True, timeout=300)


def _runs(state: Path) -> list[Path]:
    runs = state / "mgtutor" / "runs"
    return sorted(runs.iterdir()) if runs.is_dir() else []


def test_a_full_state_disk_drops_the_ranks_output_and_the_training_goes_on(
        small_disk: Callable[..., Path], tmp_path: Path, standin_torchrun: list[str]) -> None:
    state = small_disk("2m")
    (tmp_path / "chatty.py").write_text(CHATTY)
    done = _mgtutor(state, "run", "--nproc", "2", "--", "chatty.py", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "done0").read_text() == "trained" and (tmp_path / "done1").read_text() == "trained"
    assert "Traceback" not in done.stderr + done.stdout
    assert "[torchrun] mgtutor: warning: only" in done.stdout  # said at the start: the disk is low
    assert "run finished" in done.stderr
    assert "was not written to their logs (No space left on device)" in done.stderr
    (run,) = _runs(state)
    result = json.loads((run / "result.json").read_text())
    assert result["status"] == "finished" and [r["outcome"] for r in result["ranks"]] == ["ok", "ok"]
    assert sorted(result["output_dropped"]) == ["0", "1"]
    for rank in ("0", "1"):
        lost = result["output_dropped"][rank]
        kept = (run / "logs" / f"rank{rank}.stdout.log").stat().st_size
        assert lost["stdout"] > 0 and kept + lost["stdout"] >= 800 * 8000  # what was not kept was counted
        assert json.loads((run / "ranks" / f"rank{rank}.json").read_text())["exit_code"] == 0


@pytest.mark.parametrize("command", [["run", "--nproc", "2", "--", "chatty.py"], ["train", "--steps", "2"]])
def test_a_full_disk_refuses_the_run_in_one_line_and_leaves_no_run_folder(
        command: list[str], small_disk: Callable[..., Path], tmp_path: Path) -> None:
    state = small_disk("1m")
    (tmp_path / "chatty.py").write_text(CHATTY)
    with open(state / "filler", "wb") as filler:
        try:
            filler.write(b"\0" * (2 << 20))
        except OSError:
            pass
    done = _mgtutor(state, *command, cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "not even the run record fits" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert _runs(state) == []


def test_a_disk_with_no_inode_left_leaves_no_half_made_run_folder(
        small_disk: Callable[..., Path], tmp_path: Path) -> None:
    state = small_disk("64m", inodes=7)  # the mount, mgtutor/, runs/, the run, logs/, ranks/, stop.lock
    (tmp_path / "chatty.py").write_text(CHATTY)
    done = _mgtutor(state, "run", "--", "chatty.py", cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "cannot keep the run record: No space left on device" in done.stderr
    assert _runs(state) == []
    assert not (tmp_path / "done0").exists()


def test_a_rank_file_is_written_over_itself_or_its_reserve_when_no_new_file_fits(
        small_disk: Callable[..., Path]) -> None:
    from mgtutor.training.runs.launch.disk import reserve, write_json_anyway

    disk = small_disk("64k")
    rank_file = disk / "rank0.json"
    assert write_json_anyway(rank_file, {"rank": 0, "pid": 12})
    reserve(disk / "rank1.json", 4096)  # as the launcher does for every rank before the run starts
    with open(disk / "filler", "wb") as filler:
        try:
            filler.write(b"\0" * (1 << 20))
        except OSError:
            pass
    assert write_json_anyway(rank_file, {"rank": 0, "pid": 12, "exit_code": 0})
    assert json.loads(rank_file.read_text()) == {"rank": 0, "pid": 12, "exit_code": 0}
    assert write_json_anyway(disk / "rank1.json", {"rank": 1, "pid": 13})  # into the space set aside for it
    assert json.loads((disk / "rank1.json").read_text()) == {"rank": 1, "pid": 13}
    assert not write_json_anyway(disk / "new.json", {"rank": 2})  # no blocks for it: False, not an exception
    assert sorted(os.listdir(disk)) == ["filler", "rank0.json", "rank1.json"]
