"""`-o FILE` of every command goes through one writer (safe_io.write_output; issue 46, item 1): a
regular file is replaced atomically, anything else never is. A device (/dev/null) or a FIFO is
written in place, a FIFO nobody reads or a folder is refused in one line, `-o -` is standard output.
No test here touches the system's own device nodes: they use links to them, FIFOs and (as root)
device nodes made in a temporary folder."""
from __future__ import annotations

import errno
import fcntl
import json
import os
import shutil
import stat
from pathlib import Path

import pytest

from mgtutor.training.runs.records.record import runs_root
from mgtutor.training.foundation.safe_io import NotARegularFile, write_output
from mgtutor.tui.cli import main as cli_main

FIXTURE = Path(__file__).parent / "data" / "monitor_runs" / "20260101-000000-train-tinycnn-f1x7"
IMAGE = "nvcr.io/nvidia/pytorch:24.12-py3"


@pytest.fixture
def fifo_with_reader(tmp_path: Path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    fcntl.fcntl(reader, getattr(fcntl, "F_SETPIPE_SZ", 1031), 1 << 20)  # a whole report fits while nobody reads
    yield fifo, reader
    os.close(reader)


def _drain(fd: int) -> bytes:
    out = b""
    while True:
        try:
            chunk = os.read(fd, 1 << 16)
        except BlockingIOError:
            return out
        if not chunk:
            return out
        out += chunk


def test_a_fifo_is_written_in_place_never_replaced(fifo_with_reader) -> None:
    fifo, reader = fifo_with_reader
    assert write_output(fifo, "hello\n") == fifo
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert _drain(reader) == b"hello\n"


def test_a_fifo_nobody_reads_and_a_folder_are_refused_in_one_line(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(NotARegularFile, match="FIFO.*nobody reads"):
        write_output(fifo, "x")  # opening it for writing would wait for a reader: refused, never waited on
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    with pytest.raises(OSError) as caught:
        write_output(tmp_path, "x")
    assert caught.value.errno in (errno.EISDIR, errno.EINVAL) and tmp_path.is_dir()


def test_a_link_to_dev_null_stays_a_link_and_dev_null_a_device(tmp_path: Path) -> None:
    link = tmp_path / "out.html"
    link.symlink_to("/dev/null")
    write_output(link, "report")
    assert link.is_symlink() and os.readlink(link) == "/dev/null"
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


@pytest.mark.skipif(os.geteuid() != 0, reason="making a device node needs root")
def test_a_device_node_is_written_never_renamed_over(tmp_path: Path) -> None:
    node = tmp_path / "null"
    os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # /dev/null's numbers
    full = tmp_path / "full"
    os.mknod(full, stat.S_IFCHR | 0o666, os.makedev(1, 7))  # /dev/full: every write fails ENOSPC
    write_output(node, "report")
    assert stat.S_ISCHR(os.lstat(node).st_mode) and os.lstat(node).st_rdev == os.makedev(1, 3)
    with pytest.raises(OSError) as caught:
        write_output(full, "report")
    assert caught.value.errno == errno.ENOSPC and stat.S_ISCHR(os.lstat(full).st_mode)


def test_a_regular_file_is_still_replaced_atomically(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    out = tmp_path / "out" / "r.html"
    out.write_text("old")
    before = out.stat().st_ino
    write_output(out, "new")
    assert out.read_text() == "new" and out.stat().st_ino != before  # a new file renamed over it
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    assert [p.name for p in out.parent.iterdir()] == ["r.html"]  # no temporary file left beside it


def test_dash_and_dev_stdout_are_standard_output(capsys: pytest.CaptureFixture[str]) -> None:
    assert write_output("-", "one\n") is None
    assert write_output("/dev/stdout", "two\n") is None
    assert capsys.readouterr().out == "one\ntwo\n"


@pytest.fixture
def record_dir(monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")
    path = runs_root() / FIXTURE.name
    shutil.copytree(FIXTURE, path)
    return path


def test_report_o_dash_prints_the_markdown_and_a_fifo_gets_it(record_dir: Path, fifo_with_reader,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["report", record_dir.name, "--markdown", "--doctor", "none", "-o", "-"]) == 0
    out = capsys.readouterr().out
    assert "Describe the bug" in out and not (Path.cwd() / "-").exists()
    fifo, reader = fifo_with_reader
    assert cli_main(["report", record_dir.name, "--markdown", "--doctor", "none", "-o", str(fifo)]) == 0
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and b"Describe the bug" in _drain(reader)
    assert cli_main(["report", record_dir.name, "--json", "--doctor", "none", "-o", "-"]) == 2
    assert "both write to standard output" in capsys.readouterr().err


def test_report_to_a_link_to_dev_null_keeps_the_link(record_dir: Path, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    link = tmp_path / "null"
    link.symlink_to("/dev/null")
    assert cli_main(["report", record_dir.name, "--markdown", "--doctor", "none", "--json", "-o", str(link)]) == 0
    assert json.loads(capsys.readouterr().out)["bytes"] is None
    assert link.is_symlink()


@pytest.mark.parametrize("argv", [["slurm", "--nodes", "2"], ["k8s", "--image", IMAGE]])
def test_job_files_with_force_write_a_fifo_in_place(argv: list[str], fifo_with_reader,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    fifo, reader = fifo_with_reader
    assert cli_main([*argv, "--force", "-o", str(fifo), "--", "train.py"]) == 0
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and b"train.py" in _drain(reader)
    assert cli_main([*argv, "-o", "-", "--", "train.py"]) == 0
    assert "train.py" in capsys.readouterr().out
