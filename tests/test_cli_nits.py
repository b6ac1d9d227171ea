"""The rough edges a new user hit on the command line (issue 27, item 13)."""
from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import no_gpu_env
from mgtutor.tui.cli import main as cli_main

MISTAKE = ("def never_called():\n"
           "    import torch.distributed as dist\n"
           "    from torch.utils.data import DataLoader\n"
           "    dist.init_process_group('gloo')\n"
           "    return DataLoader(ds, shuffle=True)\n")


@pytest.mark.integration
def test_python_dash_m_mgtutor_is_the_command_line(tmp_path) -> None:
    done = subprocess.run([sys.executable, "-m", "mgtutor", "--help"], capture_output=True, text=True, timeout=60,
                          cwd=tmp_path, env=no_gpu_env())
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: mgtutor") and "doctor" in done.stdout


@pytest.mark.parametrize("nproc", ["0", "-2"])
def test_a_bad_nproc_is_the_only_line_before_any_check(nproc: str, write_script, capsys) -> None:
    script = write_script("ddp_mistake.py", MISTAKE)  # `mgtutor check` has findings to print for it
    with pytest.raises(SystemExit) as exited:  # the shared option's check, as argparse ends on a bad value
        cli_main(["run", "--nproc", nproc, "--", str(script)])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err == f"mgtutor run: error: --nproc must be a whole number of at least 1 (got '{nproc}')\n"


def test_a_directory_is_said_to_be_one(tmp_path, capsys) -> None:
    (tmp_path / "project").mkdir()
    assert cli_main(["run", "--", str(tmp_path / "project")]) == 2
    err = capsys.readouterr().err
    assert "is a directory, not a script" in err and "no such script" not in err
    assert cli_main(["run", "--", str(tmp_path / "missing.py")]) == 2
    assert "no such script" in capsys.readouterr().err
